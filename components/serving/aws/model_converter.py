"""The conversion and evaluation Jobs' identity on the serving cluster: one role (the registry's read grant on
checkpoints/, datasets/calibration/ and datasets/evals/, its write grant on models/ with an explicit Deny on
aliases and version claims, and leave to assume itself), the `model-converter` ServiceAccount, and the EKS Pod
Identity association between them. Each Job down-scopes its session to its own promotion's prefixes
(infra/serving/aws/converter_access.py), so no stack update is needed per promotion."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aliases import aliased
from components.registry.aws.access import RegistryAccess
from infra.serving.aws import converter_access as access


@dataclass(frozen=True)
class ModelConverterArgs:
    role_name: str  # fixed, so the role's own ARN is known for its self-trust
    partition: str
    account_id: str
    namespace: str
    cluster_name: pulumi.Input[str]
    registry: RegistryAccess
    tags: Mapping[str, str]
    after: Sequence[pulumi.Resource] = field(default_factory=list)  # the namespace (cluster add-ons)


class ModelConverter(pulumi.ComponentResource):
    """Kubernetes objects use the provider passed in opts.providers."""

    def __init__(self, name: str, args: ModelConverterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(
            "mlinfra:serving:ModelConverter", name, None, aliased(opts, "mlinfra:model_converter:ModelConverter")
        )
        tags = dict(args.tags)
        arn = access.role_arn(args.partition, args.account_id, args.role_name)
        self.role = aws.iam.Role(
            f"{name}-role",
            name=args.role_name,
            assume_role_policy=json.dumps(access.trust_policy(args.partition, args.account_id, arn)),
            description=(
                "model conversion and evaluation Jobs: read checkpoints/, datasets/calibration/ and datasets/evals/, "
                "write models/; each Job down-scopes its session"
            ),
            max_session_duration=3600,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        args.registry.grant_read(self.role, "checkpoints/")
        # The quality gate's evaluation Jobs read the fixed evaluation data (infra/ops/promotion/evaluation.py).
        args.registry.grant_read(self.role, "datasets/evals/")
        # A calibrated quantiser (cuda-int4's AWQ scale search) reads its calibration data (recipes.py). A grant
        # of its own: adding the prefix to the one above would rename, hence replace, that policy.
        args.registry.grant_read(self.role, "datasets/calibration/")
        args.registry.grant_write(self.role, "models/")
        aws.iam.RolePolicy(
            f"{name}-role-self-assume",
            role=self.role.id,
            policy=json.dumps(access.self_assume_policy(arn)),
            opts=pulumi.ResourceOptions(parent=self.role),
        )
        # Aliases and version claims are written by `promote` with the operator's credentials, never by Jobs.
        aws.iam.RolePolicy(
            f"{name}-role-deny-promotion-objects",
            role=self.role.id,
            policy=args.registry.bucket_arn.apply(lambda bucket: json.dumps(access.promotion_objects_deny(bucket))),
            opts=pulumi.ResourceOptions(parent=self.role),
        )
        # No session tags: they would be carried into every chained session and eat into the packed size
        # STS allows for session policy plus tags.
        aws.eks.PodIdentityAssociation(
            f"{name}-identity",
            cluster_name=args.cluster_name,
            namespace=args.namespace,
            service_account=access.SERVICE_ACCOUNT,
            role_arn=self.role.arn,
            disable_session_tags=True,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        account = access.service_account(args.namespace)
        k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata=account["metadata"],
            automount_service_account_token=account["automountServiceAccountToken"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.after)),
        )
        self.register_outputs({"roleArn": self.role.arn, "serviceAccount": access.SERVICE_ACCOUNT})
