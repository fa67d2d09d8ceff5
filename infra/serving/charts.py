"""Pinned Helm charts of the serving cluster and their values (pure).

Versions are pinned so a `pulumi up` months later installs the same thing; bump them deliberately.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.serving.scheduling import ACCELERATOR_LABEL, POOL_LABEL, taint

MONITORING_NAMESPACE = "monitoring"
AUTOSCALER_SERVICE_ACCOUNT = "cluster-autoscaler"


@dataclass(frozen=True)
class Chart:
    release: str  # release name (fixed, so services have known names)
    chart: str
    version: str
    repository: str | None  # None for OCI charts, whose `chart` is the oci:// reference
    namespace: str


NVIDIA_DEVICE_PLUGIN = Chart(
    "nvidia-device-plugin",
    "nvidia-device-plugin",
    "0.17.0",
    "https://nvidia.github.io/k8s-device-plugin",
    "kube-system",
)
# Device plugin and the Neuron scheduler extension (with its own kube-scheduler, `my-scheduler`).
NEURON = Chart("neuron", "oci://public.ecr.aws/neuron/neuron-helm-chart", "1.1.2", None, "kube-system")
KEDA = Chart("keda", "keda", "2.16.1", "https://kedacore.github.io/charts", "keda")
PROMETHEUS = Chart(
    "prometheus", "prometheus", "27.2.0", "https://prometheus-community.github.io/helm-charts", MONITORING_NAMESPACE
)
CLUSTER_AUTOSCALER = Chart(
    "cluster-autoscaler", "cluster-autoscaler", "9.43.2", "https://kubernetes.github.io/autoscaler", "kube-system"
)

_SYSTEM_NODES = {POOL_LABEL: "system"}


def nvidia_values() -> dict[str, Any]:
    return {
        "nodeSelector": {ACCELERATOR_LABEL: "g5"},
        "tolerations": [taint("g5").toleration(), {"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "priorityClassName": "system-node-critical",
    }


def neuron_values() -> dict[str, Any]:
    return {
        "devicePlugin": {
            "nodeSelector": {ACCELERATOR_LABEL: "inf2"},
            "tolerations": [taint("inf2").toleration(), {"key": "CriticalAddonsOnly", "operator": "Exists"}],
        },
        "scheduler": {
            "enabled": True,
            "nodeSelector": _SYSTEM_NODES,
            "customScheduler": {"enabled": True, "nodeSelector": _SYSTEM_NODES},
        },
        # The node problem detector's recovery needs its own AWS role; not part of this stack.
        "npd": {"enabled": False},
    }


def keda_values() -> dict[str, Any]:
    return {
        "nodeSelector": _SYSTEM_NODES,
        "podDisruptionBudget": {"operator": {"minAvailable": 1}},
    }


def prometheus_values() -> dict[str, Any]:
    """A Prometheus server that scrapes annotated pods (the chart's kubernetes-pods job) and keeps
    two days: it feeds the autoscaler, it is not the long-term metrics store."""
    return {
        "alertmanager": {"enabled": False},
        "prometheus-pushgateway": {"enabled": False},
        "prometheus-node-exporter": {"enabled": False},
        "kube-state-metrics": {"nodeSelector": _SYSTEM_NODES},
        "server": {
            "retention": "2d",
            "global": {"scrape_interval": "15s", "evaluation_interval": "15s"},
            # No EBS CSI driver in this stack: series live on the pod and are rebuilt after a restart.
            "persistentVolume": {"enabled": False},
            "nodeSelector": _SYSTEM_NODES,
            "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
        },
    }


def cluster_autoscaler_values(cluster_name: str, region: str, kubernetes_version: str) -> dict[str, Any]:
    return {
        "cloudProvider": "aws",
        "awsRegion": region,
        # Managed node groups tag their Auto Scaling groups for this discovery.
        "autoDiscovery": {"clusterName": cluster_name},
        # The autoscaler's minor version must match the cluster's.
        "image": {"tag": f"v{kubernetes_version}.0"},
        "rbac": {"serviceAccount": {"create": True, "name": AUTOSCALER_SERVICE_ACCOUNT}},
        "nodeSelector": _SYSTEM_NODES,
        "extraArgs": {
            "expander": "least-waste",
            "balance-similar-node-groups": "true",
            "skip-nodes-with-system-pods": "false",
            # Consolidation when empty: an accelerator node with no model server goes after 5 minutes.
            "scale-down-unneeded-time": "5m",
            "scale-down-delay-after-add": "5m",
            "scale-down-utilization-threshold": "0.5",
        },
    }
