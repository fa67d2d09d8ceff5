"""The training nodes' role: SSM Session Manager instead of SSH, and registry access only through the
registry's own grants (read `datasets/`; write this run's checkpoints and markers only: `models/` is
promotion's)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.registry.aws.access import RegistryAccess

EC2_TRUST = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}


@dataclass(frozen=True)
class NodeRoleArgs:
    registry: RegistryAccess
    read_prefixes: tuple[str, ...]
    write_prefixes: tuple[str, ...]
    partition: str
    tags: Mapping[str, str]


class NodeRole(pulumi.ComponentResource):
    def __init__(self, name: str, args: NodeRoleArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:training:NodeRole", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags)
        self.role = aws.iam.Role(
            f"{name}-role",
            assume_role_policy=json.dumps(EC2_TRUST),
            description="mlinfra training node: SSM sessions, registry datasets in, checkpoints out",
            max_session_duration=3600,
            tags=tags,
            opts=child,
        )
        aws.iam.RolePolicyAttachment(
            f"{name}-ssm",
            role=self.role.name,
            policy_arn=f"arn:{args.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore",
            opts=child,
        )
        args.registry.grant_read(self.role, *args.read_prefixes)
        args.registry.grant_write(self.role, *args.write_prefixes)
        self.instance_profile = aws.iam.InstanceProfile(f"{name}-profile", role=self.role.name, tags=tags, opts=child)
        self.register_outputs({"roleArn": self.role.arn, "instanceProfileArn": self.instance_profile.arn})
