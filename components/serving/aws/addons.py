"""Cluster add-ons that run on the system nodes: CoreDNS, the cluster autoscaler (with its pod
identity), KEDA, Prometheus, and the model servers' namespace."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aliases import aliased
from components.serving.aws.pod_identity import pod_identity_role
from components.serving.helm_release import helm_release
from infra.serving import charts, manifests
from infra.serving.aws import eks, iam


@dataclass(frozen=True)
class ClusterAddonsArgs:
    cluster_name: pulumi.Input[str]
    cluster_name_plain: str  # for values and policies that must be known at declaration
    region: str
    kubernetes_version: str
    workload_namespace: str
    tags: Mapping[str, str]
    after: Sequence[pulumi.Resource] = field(default_factory=list)  # node pools
    # The cluster autoscaler's priority expander (node_pools.expander_priorities); none without Spot pools.
    expander_priorities: Mapping[int, Sequence[str]] = field(default_factory=dict)


class ClusterAddons(pulumi.ComponentResource):
    """AWS resources use the default provider; Kubernetes ones the provider passed in opts.providers."""

    def __init__(self, name: str, args: ClusterAddonsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(
            "mlinfra:serving:ClusterAddons", name, None, aliased(opts, "mlinfra:cluster_addons:ClusterAddons")
        )
        tags = dict(args.tags)
        after = list(args.after)
        # CoreDNS needs nodes to run on; created before them it would wait for ever in DEGRADED.
        coredns = [
            aws.eks.Addon(
                f"{name}-{addon}",
                cluster_name=args.cluster_name,
                addon_name=addon,
                resolve_conflicts_on_create="OVERWRITE",
                resolve_conflicts_on_update="OVERWRITE",
                tags=tags,
                opts=pulumi.ResourceOptions(parent=self, depends_on=after),
            )
            for addon in eks.NODE_ADDONS
        ]

        _, identity = pod_identity_role(
            f"{name}-autoscaler",
            iam.PodScope(args.cluster_name_plain, charts.AUTOSCALER_NAMESPACE, charts.AUTOSCALER_SERVICE_ACCOUNT),
            json.dumps(iam.cluster_autoscaler_policy(args.cluster_name_plain)),
            args.cluster_name,
            tags,
            self,
        )

        ready = after + coredns
        self.autoscaler = helm_release(
            f"{name}-cluster-autoscaler",
            charts.cluster_autoscaler_chart(args.kubernetes_version),
            charts.cluster_autoscaler_values(args.cluster_name_plain, args.region, args.expander_priorities),
            self,
            ready + [identity],
        )
        self.prometheus = helm_release(f"{name}-prometheus", charts.PROMETHEUS, charts.prometheus_values(), self, ready)
        self.keda = helm_release(
            f"{name}-keda", charts.keda_chart(args.kubernetes_version), charts.keda_values(), self, ready
        )
        ns = manifests.namespace(args.workload_namespace)
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-namespace", metadata=ns["metadata"], opts=pulumi.ResourceOptions(parent=self, depends_on=ready)
        )
        self.register_outputs({"namespace": self.namespace.metadata["name"], "keda": self.keda.status})
