"""The Kubernetes objects of one model server, whatever the cloud (a helper for the EKS and GKE model
server components; not a component itself): ServiceAccount, Deployment, Service, PodDisruptionBudget and
the KEDA ScaledObject, from the pure manifests in infra/serving/manifests.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from infra.serving import manifests, servers
from infra.serving.aws.config import ModelSpec
from infra.serving.startup import StartupBudget


@dataclass(frozen=True)
class ModelObjects:
    deployment: k8s.apps.v1.Deployment
    service: k8s.core.v1.Service
    scaled_object: k8s.apiextensions.CustomResource


def declare_model_objects(
    name: str,
    model: ModelSpec,
    ns: str,
    registry_location: pulumi.Input[manifests.Registry],
    parent: pulumi.Resource,
    after: Sequence[pulumi.Resource],
    identity: Sequence[pulumi.Resource] = (),
    account_annotations: Mapping[str, pulumi.Input[str]] | None = None,
    budgets: Mapping[str, StartupBudget] | None = None,
) -> ModelObjects:
    """`after`: add-ons (KEDA CRDs, device plugins, namespace); `identity`: what must exist before the
    first pod asks for cloud credentials (EKS Pod Identity association, GKE workload identity binding);
    `budgets`: the replica's start-up budget on each type that holds one."""
    after = list(after)
    k8s_opts = pulumi.ResourceOptions(parent=parent, depends_on=after)
    account = manifests.service_account(model, ns, dict(account_annotations or {}))
    k8s.core.v1.ServiceAccount(
        f"{name}-sa",
        metadata=account["metadata"],
        automount_service_account_token=account["automountServiceAccountToken"],
        opts=k8s_opts,
    )
    rollout = f"{servers.PROFILES[model.accelerator].startup.rollout_seconds}s"
    deployment_spec = pulumi.Output.from_input(registry_location).apply(
        lambda registry: manifests.deployment(model, ns, registry, budgets)["spec"]
    )
    # The manifests are whole Kubernetes objects as plain dicts (checked against the Kubernetes schemas by
    # the tests); the SDK's overloads type only its Args classes and TypedDicts.
    deployment = k8s.apps.v1.Deployment(  # type: ignore[call-overload]
        f"{name}-deployment",
        metadata=manifests.deployment_metadata(model, ns, budgets),
        spec=deployment_spec,
        opts=pulumi.ResourceOptions(
            parent=parent,
            depends_on=after + list(identity),
            # A cold start (node, multi-GB image, weights) outlasts Pulumi's 10-minute default wait.
            custom_timeouts=pulumi.CustomTimeouts(create=rollout, update=rollout),
        ),
    )
    service = manifests.service(model, ns)
    service_resource = k8s.core.v1.Service(
        f"{name}-service", metadata=service["metadata"], spec=service["spec"], opts=k8s_opts
    )
    budget = manifests.pod_disruption_budget(model, ns)
    k8s.policy.v1.PodDisruptionBudget(f"{name}-pdb", metadata=budget["metadata"], spec=budget["spec"], opts=k8s_opts)
    scaler = manifests.scaled_object(model, ns, budgets)
    scaled_object = k8s.apiextensions.CustomResource(
        f"{name}-scaler",
        api_version=scaler["apiVersion"],
        kind=scaler["kind"],
        metadata=scaler["metadata"],
        spec=scaler["spec"],
        opts=pulumi.ResourceOptions(parent=parent, depends_on=after + [deployment]),
    )
    return ModelObjects(deployment, service_resource, scaled_object)
