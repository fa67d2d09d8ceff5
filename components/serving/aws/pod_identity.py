"""An AWS role handed to one service account through EKS Pod Identity (a helper for components; not a component
itself): trusted by that association's session tags only, with its one inline policy."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pulumi
import pulumi_aws as aws

from infra.serving.aws import iam


def pod_identity_role(
    name: str,
    scope: iam.PodScope,
    policy: pulumi.Input[str],
    cluster_name: pulumi.Input[str],
    tags: Mapping[str, str],
    parent: pulumi.Resource,
) -> tuple[aws.iam.Role, aws.eks.PodIdentityAssociation]:
    role = aws.iam.Role(
        f"{name}-role",
        assume_role_policy=json.dumps(iam.pod_identity_trust(scope)),
        tags=dict(tags),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    aws.iam.RolePolicy(f"{name}-policy", role=role.id, policy=policy, opts=pulumi.ResourceOptions(parent=role))
    identity = aws.eks.PodIdentityAssociation(
        f"{name}-identity",
        cluster_name=cluster_name,
        namespace=scope.namespace,
        service_account=scope.service_account,
        role_arn=role.arn,
        tags=dict(tags),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    return role, identity
