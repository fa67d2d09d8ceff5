"""One model server: its own AWS role (read-only on its artefact prefix, through EKS Pod Identity) and
its Kubernetes objects (ServiceAccount, Deployment, Service, PodDisruptionBudget, KEDA ScaledObject)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.aliases import aliased
from components.registry.aws.access import RegistryAccess
from components.serving.model_server_objects import declare_model_objects
from infra.serving import manifests
from infra.serving.aws import iam
from infra.serving.aws.config import ModelSpec
from infra.serving.startup import StartupBudget


@dataclass(frozen=True)
class ModelServerArgs:
    model: ModelSpec
    namespace: str
    cluster_name: pulumi.Input[str]
    registry: RegistryAccess
    registry_location: pulumi.Input[manifests.Registry]  # bucket and region, from the registry stack
    tags: Mapping[str, str]
    after: Sequence[pulumi.Resource] = field(default_factory=list)  # add-ons: KEDA CRDs, device plugins, namespace
    budgets: Mapping[str, StartupBudget] = field(default_factory=dict)  # start-up on each type that holds a replica


class ModelServer(pulumi.ComponentResource):
    """Kubernetes objects use the provider passed in opts.providers."""

    def __init__(self, name: str, args: ModelServerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:serving:ModelServer", name, None, aliased(opts, "mlinfra:model_server:ModelServer"))
        model, ns, tags = args.model, args.namespace, dict(args.tags)
        self.prefix = manifests.artefact_prefix(model)

        self.role = aws.iam.Role(
            f"{name}-role",
            assume_role_policy=pulumi.Output.from_input(args.cluster_name).apply(
                lambda cluster: json.dumps(iam.pod_identity_trust(iam.PodScope(cluster, ns, model.name)))
            ),
            description=f"model server {model.name}: reads {self.prefix} only",
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        args.registry.grant_read(self.role, self.prefix)
        identity = aws.eks.PodIdentityAssociation(
            f"{name}-identity",
            cluster_name=args.cluster_name,
            namespace=ns,
            service_account=model.name,
            role_arn=self.role.arn,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self),
        )

        # Credentials must be associated before the first pod asks for them.
        objects = declare_model_objects(
            name, model, ns, args.registry_location, self, args.after, identity=[identity], budgets=args.budgets
        )
        self.deployment, self.service, self.scaled_object = objects.deployment, objects.service, objects.scaled_object
        self.register_outputs(
            {"prefix": self.prefix, "roleArn": self.role.arn, "service": f"{model.name}.{ns}.svc.cluster.local"}
        )
