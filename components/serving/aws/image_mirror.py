"""The account's image mirror: ECR pull-through cache rules (ECR Public always, Docker Hub with a credential)
and the node role's right to fill them on first pull (plans in infra/serving/aws/mirror.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.serving.aws import mirror as plans


@dataclass(frozen=True)
class ImageMirrorArgs:
    account_id: str
    region: str
    partition: str
    dns_suffix: str
    node_role_name: pulumi.Input[str]
    docker_hub_credential_arn: str | None = None


class ImageMirror(pulumi.ComponentResource):
    def __init__(self, name: str, args: ImageMirrorArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:serving:ImageMirror", name, None, opts)
        upstreams = [plans.ECR_PUBLIC] + ([plans.DOCKER_HUB] if args.docker_hub_credential_arn else [])
        self.rules = [
            aws.ecr.PullThroughCacheRule(
                f"{name}-{upstream.prefix}",
                ecr_repository_prefix=upstream.prefix,
                upstream_registry_url=upstream.url,
                credential_arn=args.docker_hub_credential_arn if upstream.needs_credential else None,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for upstream in upstreams
        ]
        self.mirror = plans.Mirror(
            plans.registry_host(args.account_id, args.region, args.dns_suffix), tuple(u.prefix for u in upstreams)
        )
        aws.iam.RolePolicy(
            f"{name}-node-pull-through",
            role=args.node_role_name,
            policy=json.dumps(
                plans.pull_through_policy(self.mirror.repository_arns(args.partition, args.region, args.account_id))
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"host": self.mirror.host, "upstreams": list(self.mirror.upstreams)})
