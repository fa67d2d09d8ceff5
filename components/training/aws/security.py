"""Security groups of a training run: the EFA fabric between nodes, and Lustre between the file system
and the nodes. No ingress from any address range: every ingress rule's peer is one of these groups."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.training.aws.network import LUSTRE_PORT_RANGES


@dataclass(frozen=True)
class ClusterSecurityArgs:
    vpc_id: pulumi.Input[str]
    tags: Mapping[str, str]


class ClusterSecurity(pulumi.ComponentResource):
    def __init__(self, name: str, args: ClusterSecurityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:training:ClusterSecurity", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        self.nodes = aws.ec2.SecurityGroup(
            f"{name}-nodes",
            vpc_id=args.vpc_id,
            description="Training nodes: EFA between nodes, Lustre client",
            tags={**tags, "Name": f"{name}-nodes"},
            opts=child,
        )
        self.lustre = aws.ec2.SecurityGroup(
            f"{name}-lustre",
            vpc_id=args.vpc_id,
            description="FSx for Lustre of the run: TCP 988, 1018-1023",
            tags={**tags, "Name": f"{name}-lustre"},
            opts=child,
        )
        # EFA needs all traffic in AND out with the group itself as the peer; an open egress rule alone
        # does not do (ParallelCluster's EfaSecurityGroupValidator; docs/reference.md).
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-efa-in",
            security_group_id=self.nodes.id,
            ip_protocol="-1",
            referenced_security_group_id=self.nodes.id,
            description="EFA and collectives from the run's nodes",
            tags=tags,
            opts=child,
        )
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-efa-out",
            security_group_id=self.nodes.id,
            ip_protocol="-1",
            referenced_security_group_id=self.nodes.id,
            description="EFA and collectives to the run's nodes",
            tags=tags,
            opts=child,
        )
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-nodes-out",
            security_group_id=self.nodes.id,
            ip_protocol="-1",
            cidr_ipv4="0.0.0.0/0",
            description="Images, packages, S3 and AWS APIs through the VPC's endpoints or NAT",
            tags=tags,
            opts=child,
        )
        peers = {"nodes": self.nodes, "lustre": self.lustre}
        # FSx refuses to create a file system while its group does not yet open the Lustre ports
        # (aws-parallelcluster #6181): the file system depends on every one of these rules.
        self.lustre_rules: list[pulumi.Resource] = []
        # (group the rule belongs to, direction, peer): servers and clients talk both ways, and the
        # file servers among themselves (FSx for Lustre guide, "File system access control with Amazon VPC").
        lustre_rules = [
            ("lustre", "in", "nodes"),
            ("lustre", "in", "lustre"),
            ("lustre", "out", "nodes"),
            ("lustre", "out", "lustre"),
            ("nodes", "in", "lustre"),
        ]
        for group, direction, peer in lustre_rules:
            rule = aws.vpc.SecurityGroupIngressRule if direction == "in" else aws.vpc.SecurityGroupEgressRule
            for low, high in LUSTRE_PORT_RANGES:
                ports = str(low) if low == high else f"{low}-{high}"
                created = rule(
                    f"{name}-{group}-{direction}-{peer}-{ports}",
                    security_group_id=peers[group].id,
                    ip_protocol="tcp",
                    from_port=low,
                    to_port=high,
                    referenced_security_group_id=peers[peer].id,
                    description=f"Lustre TCP {ports} {'from' if direction == 'in' else 'to'} {peer}",
                    tags=tags,
                    opts=child,
                )
                self.lustre_rules.append(created)
        self.register_outputs({"nodesSecurityGroupId": self.nodes.id, "lustreSecurityGroupId": self.lustre.id})
