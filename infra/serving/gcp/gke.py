"""GKE decisions as pure functions: node pool plans (taints, labels, accelerators, bounds), the workload
identity names, and the kubeconfig of the stack's Kubernetes provider."""

from __future__ import annotations

import json
from dataclasses import dataclass

from infra.catalog.gcp import machine_type
from infra.serving.gcp.config import GkePoolSpec
from infra.serving.scheduling import ACCELERATOR_LABEL, POOL_LABEL, Taint, taint

# Add-ons (KEDA, Prometheus, kube-dns) run on untainted nodes of this general-purpose type (priced from
# gcp_machines.json's generalPurposeTypes; the rest of that catalog is accelerator types).
SYSTEM_MACHINE_TYPE = "e2-standard-4"
NODE_OAUTH_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)  # access decided by IAM, not scopes
# What GKE nodes need to log, report metrics and pull images (Google's least-privilege node account roles).
NODE_ROLES = (
    "roles/logging.logWriter",
    "roles/monitoring.metricWriter",
    "roles/monitoring.viewer",
    "roles/stackdriver.resourceMetadata.writer",
    "roles/artifactregistry.reader",
)
# A regional node pool with no node_locations spans GKE's default zones of the region: three.
DEFAULT_ZONES = 3
GKE_EFFECT = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}


@dataclass(frozen=True)
class GkePoolPlan:
    family: str
    machine_type: str
    accelerator_type: str | None
    accelerator_count: int
    min_nodes: int  # in total over the pool's zones (the autoscaler's total_* bounds, not its per-zone ones)
    max_nodes: int
    disk_gib: int
    spot: bool
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    node_locations: tuple[str, ...] = ()  # zones of the pool; () leaves the choice to GKE

    @property
    def initial_nodes_per_zone(self) -> int:
        """GKE creates initial_node_count nodes in every zone. An accelerator pool starts empty: one per zone would be
        three GPU nodes for `minNodes: 1`, and its model servers' pending replicas bring the autoscaler to add the
        nodes they need (location policy ANY: in a zone with capacity). The system pool starts with as few per zone
        as reach min_nodes in total, so the add-ons have nodes before the autoscaler runs."""
        if self.accelerator_type is not None:
            return 0
        zones = len(self.node_locations) or DEFAULT_ZONES
        return -(-self.min_nodes // zones)


def accelerator_plan(family: str, spec: GkePoolSpec, region: str) -> GkePoolPlan:
    """The pool runs in the zones of `region` the catalog says offer its type (unknown region: GKE's choice)."""
    mtype = machine_type(spec.machine_types[0])
    return GkePoolPlan(
        family=family,
        machine_type=mtype.name,
        accelerator_type=mtype.accelerator.type,
        accelerator_count=mtype.accelerator.count,
        min_nodes=spec.min_nodes,
        max_nodes=spec.max_nodes,
        disk_gib=spec.disk_gib,
        spot=spec.spot,
        labels={ACCELERATOR_LABEL: family, POOL_LABEL: family},
        taints=(taint(family),),
        node_locations=mtype.zones_in(region) or (),
    )


def system_plan(node_locations: tuple[str, ...] = ()) -> GkePoolPlan:
    """Two to six system nodes in all, in the accelerator pool's zones."""
    return GkePoolPlan(
        family="system",
        machine_type=SYSTEM_MACHINE_TYPE,
        accelerator_type=None,
        accelerator_count=0,
        min_nodes=2,  # CoreDNS, KEDA and Prometheus keep running through one node's loss
        max_nodes=6,
        disk_gib=80,
        spot=False,
        labels={POOL_LABEL: "system"},
        taints=(),
        node_locations=node_locations,
    )


def gke_taint(t: Taint) -> dict[str, str]:
    return {"key": t.key, "value": t.value, "effect": GKE_EFFECT[t.effect]}


def workload_pool(project: str) -> str:
    return f"{project}.svc.id.goog"


# The Kubernetes service account's annotation naming the Google account it acts as under Workload Identity.
WORKLOAD_IDENTITY_ANNOTATION = "iam.gke.io/gcp-service-account"


def workload_member(project: str, namespace: str, account: str) -> str:
    """The IAM member of a Kubernetes service account under Workload Identity."""
    return f"serviceAccount:{workload_pool(project)}[{namespace}/{account}]"


def kubeconfig(cluster_name: str, endpoint: str, ca_certificate: str) -> str:
    """A kubeconfig for the cluster's API that authenticates with gke-gcloud-auth-plugin (no static keys)."""
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "gke-gcloud-auth-plugin",
            "provideClusterInfo": True,
            "interactiveMode": "Never",
        }
    }
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": cluster_name,
            "clusters": [
                {
                    "name": cluster_name,
                    "cluster": {"server": f"https://{endpoint}", "certificate-authority-data": ca_certificate},
                }
            ],
            "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
            "users": [{"name": cluster_name, "user": user}],
        }
    )
