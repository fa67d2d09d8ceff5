"""Cluster add-ons of the GKE serving cluster on its system nodes: KEDA, Prometheus (which KEDA queries)
and the model servers' namespace. GKE itself provides the NVIDIA driver, device plugin and autoscaler."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.aliases import aliased
from components.serving.helm_release import helm_release
from infra.serving import charts, manifests


@dataclass(frozen=True)
class GkeAddonsArgs:
    workload_namespace: str
    after: Sequence[pulumi.Resource] = field(default_factory=list)  # node pools


class GkeAddons(pulumi.ComponentResource):
    """Needs a kubernetes provider for the cluster (opts.providers)."""

    def __init__(self, name: str, args: GkeAddonsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:serving:GkeAddons", name, None, aliased(opts, "mlinfra:gke_addons:GkeAddons"))
        after = list(args.after)
        self.prometheus = helm_release(f"{name}-prometheus", charts.PROMETHEUS, charts.prometheus_values(), self, after)
        self.keda = helm_release(
            f"{name}-keda", charts.keda_chart(charts.GKE_KUBERNETES_VERSION), charts.keda_values(), self, after
        )
        ns = manifests.namespace(args.workload_namespace)
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-namespace", metadata=ns["metadata"], opts=pulumi.ResourceOptions(parent=self, depends_on=after)
        )
        self.register_outputs({"namespace": self.namespace.metadata["name"], "keda": self.keda.status})
