"""Pinned Helm charts of the serving cluster and their values (pure).

Versions are pinned so a `pulumi up` months later installs the same thing; bump them deliberately. Every
values key here is checked against the pinned chart's own values.yaml, and the charts tied to the cluster's
Kubernetes minor against their appVersion (tests/contracts/test_chart_contracts.py, facts extracted from
each chart's release tag into tests/contracts/data/charts/).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from infra.serving.scheduling import ACCELERATOR_LABEL, POOL_LABEL, taint

MONITORING_NAMESPACE = "monitoring"
AUTOSCALER_SERVICE_ACCOUNT = "cluster-autoscaler"
AUTOSCALER_NAMESPACE = "kube-system"


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
# Device plugin and the Neuron scheduler extension (with its own kube-scheduler, `my-scheduler`). 1.0.0 is the
# newest version whose whole chart source could be had (github.com/aws-neuron/neuron-helm-charts at 8172e5e), so
# its values are checked. Re-checked 2026-11-27: the public file index shows Chart.yaml 1.1.2 and its values.yaml
# at 1a1d41e, but not its templates at that commit, and the repository snapshot still ends at 8172e5e; without
# the templates' `.Values` reads and ClusterRoles the check would not be the other charts' check, so no bump.
NEURON = Chart("neuron", "oci://public.ecr.aws/neuron/neuron-helm-chart", "1.0.0", None, "kube-system")
PROMETHEUS = Chart(
    "prometheus", "prometheus", "27.2.0", "https://prometheus-community.github.io/helm-charts", MONITORING_NAMESPACE
)


@dataclass(frozen=True)
class KubernetesRelease:
    """What must move with the cluster's Kubernetes minor version."""

    # The cluster autoscaler chart whose appVersion has this minor: its RBAC is written for that release
    # (1.32+ reads volumeattachments; an older chart with a newer image cannot list them and never scales).
    cluster_autoscaler_chart: str
    # The Neuron chart's second kube-scheduler: within the version-skew policy only at the cluster's minor.
    kube_scheduler_image: str
    # The newest KEDA chart whose release supports this minor (KEDA tests each release on three minors only).
    keda_chart: str


# Sources: the autoscaler chart's Chart.yaml at tag cluster-autoscaler-chart-<version> (kept as
# tests/contracts/data/charts/cluster-autoscaler-<version>.json); the EKS Distro kube-scheduler tags as
# published in public.ecr.aws/eks-distro/kubernetes/kube-scheduler (seen in EKS Distro release manifests
# and the Neuron operator's samples, 2026-11-24); KEDA's supported minors from keda-docs' "Kubernetes
# Compatibility" table (kept as tests/contracts/data/keda_kubernetes_support.json). Add a minor only with all three.
KUBERNETES_RELEASES = {
    "1.32": KubernetesRelease(
        "9.46.6", "public.ecr.aws/eks-distro/kubernetes/kube-scheduler:v1.32.9-eks-1-32-24", keda_chart="2.19.0"
    ),
    "1.33": KubernetesRelease(
        "9.51.0", "public.ecr.aws/eks-distro/kubernetes/kube-scheduler:v1.33.3-eks-1-33-10", keda_chart="2.20.2"
    ),
}
# GKE follows its release channel, which moves the minor under the cluster: it gets the KEDA of the newest minor
# pinned here, whose window (2.20: 1.33-1.35) is the widest ahead (docs/gcp.md says when to move it).
GKE_KUBERNETES_VERSION = max(KUBERNETES_RELEASES, key=lambda v: tuple(map(int, v.split("."))))


def cluster_autoscaler_chart(kubernetes_version: str) -> Chart:
    return Chart(
        "cluster-autoscaler",
        "cluster-autoscaler",
        KUBERNETES_RELEASES[kubernetes_version].cluster_autoscaler_chart,
        "https://kubernetes.github.io/autoscaler",
        AUTOSCALER_NAMESPACE,
    )


def keda_chart(kubernetes_version: str) -> Chart:
    return Chart(
        "keda",
        "keda",
        KUBERNETES_RELEASES[kubernetes_version].keda_chart,
        "https://kedacore.github.io/charts",
        "keda",
    )


SYSTEM_NODES = {POOL_LABEL: "system"}


# Every GPU pool's nodes carry this label (node_pools.py): the plugin runs on all of them, whatever the family.
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"


def nvidia_values() -> dict[str, Any]:
    return {
        "nodeSelector": {GPU_PRESENT_LABEL: "true"},
        "tolerations": [taint("g5").toleration(), {"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "priorityClassName": "system-node-critical",
    }


def neuron_values(kubernetes_version: str) -> dict[str, Any]:
    repository, _, tag = KUBERNETES_RELEASES[kubernetes_version].kube_scheduler_image.rpartition(":")
    return {
        "devicePlugin": {
            "nodeSelector": {ACCELERATOR_LABEL: "inf2"},
            "tolerations": [taint("inf2").toleration(), {"key": "CriticalAddonsOnly", "operator": "Exists"}],
        },
        "scheduler": {
            "enabled": True,
            # No scheduler.nodeSelector: the chart renders it only with defaultScheduler (rendered with Helm, see
            # tests/contracts/data/rendered/). With the custom scheduler the extension is placed by it, without
            # tolerations, so on untainted nodes: the system pool's (every accelerator pool is tainted).
            "customScheduler": {
                "enabled": True,
                "nodeSelector": SYSTEM_NODES,
                "image": {"repository": repository, "tag": tag},
            },
        },
        # The node problem detector's recovery needs its own AWS role; not part of this stack.
        "npd": {"enabled": False},
    }


def keda_values() -> dict[str, Any]:
    # Two operators (one leads, the other takes over) so the budget lets a drain evict one: with one
    # replica, minAvailable 1 would block every node drain of the system pool.
    return {
        "nodeSelector": SYSTEM_NODES,
        "operator": {"replicaCount": 2},
        "podDisruptionBudget": {"operator": {"minAvailable": 1}},
    }


# The endpoint pickers (the inferencepool chart's, which annotates nothing): each pod of the chart's picker Deployment
# carries this label and names its metrics port so (epplib/templates/_deployment.yaml at v1.5.0). Their metric of
# held requests wakes a model at zero; `namespace` is added here, as the kubernetes-pods job adds it.
PICKER_SCRAPE_JOB = {
    "job_name": "endpoint-pickers",
    "kubernetes_sd_configs": [{"role": "pod"}],
    "relabel_configs": [
        {
            "source_labels": [
                "__meta_kubernetes_pod_label_inference_networking_k8s_io_igw_mode",
                "__meta_kubernetes_pod_container_port_name",
            ],
            "regex": "inferencepool;metrics",
            "action": "keep",
        },
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
    ],
}


def prometheus_values() -> dict[str, Any]:
    """A Prometheus server that scrapes annotated pods (the chart's kubernetes-pods job) and the endpoint pickers,
    and keeps two days: it feeds the autoscaler, it is not the long-term metrics store."""
    return {
        "extraScrapeConfigs": yaml.safe_dump([PICKER_SCRAPE_JOB], sort_keys=False),
        "alertmanager": {"enabled": False},
        "prometheus-pushgateway": {"enabled": False},
        "prometheus-node-exporter": {"enabled": False},
        "kube-state-metrics": {"nodeSelector": SYSTEM_NODES},
        "server": {
            "retention": "2d",
            "global": {"scrape_interval": "15s", "evaluation_interval": "15s"},
            # No EBS CSI driver in this stack: series live on the pod and are rebuilt after a restart.
            "persistentVolume": {"enabled": False},
            "nodeSelector": SYSTEM_NODES,
            "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
        },
    }


def cluster_autoscaler_values(
    cluster_name: str, region: str, priorities: Mapping[int, Sequence[str]] | None = None
) -> dict[str, Any]:
    """`priorities`: the priority expander's node group patterns by priority (node_pools.expander_priorities); the
    chart renders them into the cluster-autoscaler-priority-expander ConfigMap (and its RBAC) only when the
    expander list names `priority`."""
    expander = "priority,least-waste" if priorities else "least-waste"
    return {
        "cloudProvider": "aws",
        "awsRegion": region,
        # Managed node groups tag their Auto Scaling groups for this discovery.
        "autoDiscovery": {"clusterName": cluster_name},
        # No image override: the chart (chosen by cluster_autoscaler_chart) ships the release its RBAC fits.
        "rbac": {"serviceAccount": {"create": True, "name": AUTOSCALER_SERVICE_ACCOUNT}},
        "nodeSelector": SYSTEM_NODES,
        # Spot groups first, then least-waste among the groups of one priority (cluster-autoscaler accepts a
        # comma-separated chain from 1.23); a group whose launch failed backs off (5 minutes, doubling to 30),
        # so the next priority's on-demand fallback is tried.
        **({"expanderPriorities": {str(k): list(v) for k, v in sorted(priorities.items())}} if priorities else {}),
        "extraArgs": {
            "expander": expander,
            "balance-similar-node-groups": "true",
            "skip-nodes-with-system-pods": "false",
            # Consolidation when empty: an accelerator node with no model server goes after 5 minutes.
            "scale-down-unneeded-time": "5m",
            "scale-down-delay-after-add": "5m",
            "scale-down-utilization-threshold": "0.5",
        },
    }
