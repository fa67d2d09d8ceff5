"""The serving cluster's network: private node subnets in two or more AZs, NAT egress, no public IPs, and an S3
gateway endpoint on every private route table: weights streamed from the registry bucket and the image layers ECR
serves from S3 stay off NAT's per-GB charge (docs/serving.md, "Network cost").

Subnets are named by their slot (a, b, c: the slot's CIDR, eks.subnet_plan), not by the zone's letter, which
differs per account; each is put in its zone by the name this account gives the chosen zone ID."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.aliases import aliased
from infra.serving.aws.eks import subnet_plan
from infra.serving.aws.zones import Zone


@dataclass(frozen=True)
class ServingVpcArgs:
    cidr: str
    zones: Sequence[Zone]  # the cluster's zones, in slot order (zones.choose_zones)
    tags: Mapping[str, str]
    region: str  # the S3 gateway endpoint's service: com.amazonaws.<region>.s3


class ServingVpc(pulumi.ComponentResource):
    def __init__(self, name: str, args: ServingVpcArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:serving:ServingVpc", name, None, aliased(opts, "mlinfra:serving_vpc:ServingVpc"))
        tags = dict(args.tags)
        child = pulumi.ResourceOptions(parent=self)

        self.vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=args.cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={**tags, "Name": f"{name}-vpc"},
            opts=child,
        )
        # The default security group of a VPC allows all traffic between its members; leave it with no rules.
        aws.ec2.DefaultSecurityGroup(f"{name}-default-sg", vpc_id=self.vpc.id, tags=tags, opts=child)
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=self.vpc.id, tags=tags, opts=child)
        public_routes = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=self.vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=igw.id)],
            tags=tags,
            opts=child,
        )
        self.private_subnets: list[aws.ec2.Subnet] = []
        private_route_tables: list[aws.ec2.RouteTable] = []
        for slot, plan in enumerate(subnet_plan(args.cidr, [zone.name for zone in args.zones])):
            suffix = "abcd"[slot]
            public = aws.ec2.Subnet(
                f"{name}-public-{suffix}",
                vpc_id=self.vpc.id,
                cidr_block=plan.public_cidr,
                availability_zone=plan.az,
                map_public_ip_on_launch=False,
                tags={**tags, "Name": f"{name}-public-{plan.az}", "kubernetes.io/role/elb": "1"},
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{suffix}-rta", subnet_id=public.id, route_table_id=public_routes.id, opts=child
            )
            # One NAT gateway per AZ: a long-lived fleet keeps its egress through the loss of an AZ.
            eip = aws.ec2.Eip(f"{name}-nat-{suffix}-eip", domain="vpc", tags=tags, opts=child)
            nat = aws.ec2.NatGateway(
                f"{name}-nat-{suffix}",
                allocation_id=eip.allocation_id,
                subnet_id=public.id,
                connectivity_type="public",
                tags=tags,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]),
            )
            private = aws.ec2.Subnet(
                f"{name}-private-{suffix}",
                vpc_id=self.vpc.id,
                cidr_block=plan.private_cidr,
                availability_zone=plan.az,
                map_public_ip_on_launch=False,
                tags={**tags, "Name": f"{name}-private-{plan.az}", "kubernetes.io/role/internal-elb": "1"},
                opts=child,
            )
            routes = aws.ec2.RouteTable(
                f"{name}-private-{suffix}-rt",
                vpc_id=self.vpc.id,
                routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
                tags=tags,
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{suffix}-rta", subnet_id=private.id, route_table_id=routes.id, opts=child
            )
            self.private_subnets.append(private)
            private_route_tables.append(routes)
        # Same-region S3 only: a registry bucket in another region is still reached through NAT.
        aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=self.vpc.id,
            service_name=f"com.amazonaws.{args.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=[t.id for t in private_route_tables],
            tags={**tags, "Name": f"{name}-s3"},
            opts=child,
        )

        self.private_subnet_ids = [s.id for s in self.private_subnets]  # slot order
        self.register_outputs({"vpcId": self.vpc.id, "privateSubnetIds": self.private_subnet_ids})
