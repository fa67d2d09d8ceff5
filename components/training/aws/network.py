"""The run's network: one private subnet in the chosen AZ, S3 through a gateway endpoint, and a way
out (a NAT gateway, or interface endpoints only); or the user's own VPC and subnet."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.training.aws.config import NetworkSpec
from infra.training.aws.network import INTERFACE_ENDPOINT_SERVICES, subnet_cidrs


@dataclass(frozen=True)
class TrainingNetworkArgs:
    spec: NetworkSpec
    availability_zone: str
    region: str
    tags: Mapping[str, str]


class TrainingNetwork(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    subnet_id: pulumi.Output[str]

    def __init__(self, name: str, args: TrainingNetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:training:Network", name, None, opts)
        spec = args.spec
        if spec.vpc_id and spec.subnet_id:  # the config checks refuse one without the other
            # Bring your own: nothing is created; the subnet must be private and in the chosen AZ.
            self.vpc_id = pulumi.Output.from_input(spec.vpc_id)
            self.subnet_id = pulumi.Output.from_input(spec.subnet_id)
            self.register_outputs({"vpcId": self.vpc_id, "subnetId": self.subnet_id})
            return

        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        private_cidr, public_cidr = subnet_cidrs(spec.cidr)
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=spec.cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={**tags, "Name": name},
            opts=child,
        )
        private = aws.ec2.Subnet(
            f"{name}-private",
            vpc_id=vpc.id,
            cidr_block=private_cidr,
            availability_zone=args.availability_zone,
            map_public_ip_on_launch=False,
            tags={**tags, "Name": f"{name}-private"},
            opts=child,
        )
        private_routes = aws.ec2.RouteTable(
            f"{name}-private-routes", vpc_id=vpc.id, tags={**tags, "Name": f"{name}-private"}, opts=child
        )
        aws.ec2.RouteTableAssociation(
            f"{name}-private-routes", subnet_id=private.id, route_table_id=private_routes.id, opts=child
        )
        aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=vpc.id,
            service_name=f"com.amazonaws.{args.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=[private_routes.id],
            tags={**tags, "Name": f"{name}-s3"},
            opts=child,
        )
        if spec.egress == "nat":
            self._nat(name, vpc, private_routes, public_cidr, args.availability_zone, tags)
        else:
            self._interface_endpoints(name, vpc, private, spec.cidr, args.region, tags)

        self.vpc_id = vpc.id
        self.subnet_id = private.id
        self.register_outputs({"vpcId": self.vpc_id, "subnetId": self.subnet_id})

    def _nat(
        self,
        name: str,
        vpc: aws.ec2.Vpc,
        private_routes: aws.ec2.RouteTable,
        public_cidr: str,
        availability_zone: str,
        tags: dict[str, str],
    ) -> None:
        child = pulumi.ResourceOptions(parent=self)
        gateway = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags={**tags, "Name": name}, opts=child)
        # The NAT subnet maps no public IPs either: only the NAT gateway's Elastic IP is public.
        public = aws.ec2.Subnet(
            f"{name}-nat",
            vpc_id=vpc.id,
            cidr_block=public_cidr,
            availability_zone=availability_zone,
            map_public_ip_on_launch=False,
            tags={**tags, "Name": f"{name}-nat"},
            opts=child,
        )
        public_routes = aws.ec2.RouteTable(
            f"{name}-nat-routes",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=gateway.id)],
            tags={**tags, "Name": f"{name}-nat"},
            opts=child,
        )
        aws.ec2.RouteTableAssociation(
            f"{name}-nat-routes", subnet_id=public.id, route_table_id=public_routes.id, opts=child
        )
        address = aws.ec2.Eip(
            f"{name}-nat-ip",
            domain="vpc",
            tags={**tags, "Name": f"{name}-nat"},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[gateway]),
        )
        nat = aws.ec2.NatGateway(
            f"{name}-nat",
            allocation_id=address.allocation_id,
            subnet_id=public.id,
            connectivity_type="public",
            tags={**tags, "Name": name},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[gateway]),
        )
        aws.ec2.Route(
            f"{name}-default-route",
            route_table_id=private_routes.id,
            destination_cidr_block="0.0.0.0/0",
            nat_gateway_id=nat.id,
            opts=child,
        )

    def _interface_endpoints(
        self, name: str, vpc: aws.ec2.Vpc, private: aws.ec2.Subnet, cidr: str, region: str, tags: dict[str, str]
    ) -> None:
        child = pulumi.ResourceOptions(parent=self)
        group = aws.ec2.SecurityGroup(
            f"{name}-endpoints",
            vpc_id=vpc.id,
            description="HTTPS from the run's VPC to AWS interface endpoints",
            tags={**tags, "Name": f"{name}-endpoints"},
            opts=child,
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-endpoints-https",
            security_group_id=group.id,
            ip_protocol="tcp",
            from_port=443,
            to_port=443,
            cidr_ipv4=cidr,
            description="HTTPS from the VPC",
            tags=tags,
            opts=child,
        )
        for service in INTERFACE_ENDPOINT_SERVICES:
            aws.ec2.VpcEndpoint(
                f"{name}-{service.replace('.', '-')}",
                vpc_id=vpc.id,
                service_name=f"com.amazonaws.{region}.{service}",
                vpc_endpoint_type="Interface",
                private_dns_enabled=True,
                subnet_ids=[private.id],
                security_group_ids=[group.id],
                tags={**tags, "Name": f"{name}-{service}"},
                opts=child,
            )
