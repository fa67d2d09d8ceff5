"""The identity External Secrets reads the gateway's API keys with: a Pod Identity role allowed that one secret."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi

from components.serving.aws.pod_identity import pod_identity_role
from infra.serving import gateway_charts
from infra.serving.aws import front_door, iam


@dataclass(frozen=True)
class ApiKeyReaderArgs:
    cluster_name: pulumi.Input[str]
    cluster_name_plain: str  # for the trust policy, known at declaration
    secret_arn: str
    tags: Mapping[str, str]


class ApiKeyReader(pulumi.ComponentResource):
    def __init__(self, name: str, args: ApiKeyReaderArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:serving:ApiKeyReader", name, None, opts)
        scope = iam.PodScope(args.cluster_name_plain, gateway_charts.SECRETS_NAMESPACE, gateway_charts.SECRETS_ACCOUNT)
        policy = json.dumps(front_door.api_keys_reader_policy(args.secret_arn))
        role, self.identity = pod_identity_role(name, scope, policy, args.cluster_name, args.tags, self)
        self.register_outputs({"roleArn": role.arn})
