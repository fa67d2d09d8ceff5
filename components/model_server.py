"""One model server: its own AWS role (read-only on its artefact prefix, through EKS Pod Identity) and
its Kubernetes objects (ServiceAccount, Deployment, Service, PodDisruptionBudget, KEDA ScaledObject)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.registry_access import RegistryAccess
from infra.config.serving import ModelSpec
from infra.serving import iam, manifests


@dataclass(frozen=True)
class ModelServerArgs:
    model: ModelSpec
    namespace: str
    cluster_name: pulumi.Input[str]
    registry: RegistryAccess
    registry_location: pulumi.Input[manifests.Registry]  # bucket and region, from the registry stack
    tags: Mapping[str, str]
    after: Sequence[pulumi.Resource] = field(default_factory=list)  # add-ons: KEDA CRDs, device plugins, namespace


class ModelServer(pulumi.ComponentResource):
    """Kubernetes objects use the provider passed in opts.providers."""

    def __init__(self, name: str, args: ModelServerArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("mlinfra:model_server:ModelServer", name, None, opts)
        model, ns, tags = args.model, args.namespace, dict(args.tags)
        self.prefix = manifests.artefact_prefix(model)

        self.role = aws.iam.Role(f"{name}-role", assume_role_policy=json.dumps(iam.pod_identity_trust()),
                                 description=f"model server {model.name}: reads {self.prefix} only",
                                 tags=tags, opts=pulumi.ResourceOptions(parent=self))
        args.registry.grant_read(self.role, self.prefix)
        identity = aws.eks.PodIdentityAssociation(
            f"{name}-identity", cluster_name=args.cluster_name, namespace=ns, service_account=model.name,
            role_arn=self.role.arn, tags=tags, opts=pulumi.ResourceOptions(parent=self))

        after = list(args.after)
        k8s_opts = pulumi.ResourceOptions(parent=self, depends_on=after)
        account = manifests.service_account(model, ns)
        k8s.core.v1.ServiceAccount(f"{name}-sa", metadata=account["metadata"],
                                   automount_service_account_token=account["automountServiceAccountToken"], opts=k8s_opts)
        deployment_spec = pulumi.Output.from_input(args.registry_location).apply(
            lambda registry: manifests.deployment(model, ns, registry)["spec"])
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment", metadata=manifests.metadata(model, ns), spec=deployment_spec,
            # Credentials must be associated before the first pod asks for them.
            opts=pulumi.ResourceOptions(parent=self, depends_on=after + [identity]))
        service = manifests.service(model, ns)
        self.service = k8s.core.v1.Service(f"{name}-service", metadata=service["metadata"], spec=service["spec"], opts=k8s_opts)
        budget = manifests.pod_disruption_budget(model, ns)
        k8s.policy.v1.PodDisruptionBudget(f"{name}-pdb", metadata=budget["metadata"], spec=budget["spec"], opts=k8s_opts)
        scaler = manifests.scaled_object(model, ns)
        self.scaled_object = k8s.apiextensions.CustomResource(
            f"{name}-scaler", api_version=scaler["apiVersion"], kind=scaler["kind"], metadata=scaler["metadata"],
            spec=scaler["spec"], opts=pulumi.ResourceOptions(parent=self, depends_on=after + [self.deployment]))
        self.register_outputs({"prefix": self.prefix, "roleArn": self.role.arn,
                               "service": f"{model.name}.{ns}.svc.cluster.local"})
