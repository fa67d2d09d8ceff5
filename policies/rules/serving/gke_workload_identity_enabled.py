"""Pods get cloud credentials through GKE Workload Identity, never from the node's service account: the
cluster has a workload pool and every node pool runs the GKE metadata server."""

from __future__ import annotations

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.gcp import GKE_CLUSTER, GKE_NODE_POOL, block, node_config

NAME = "gke-workload-identity-enabled"


def check(resource: Resource) -> list[str]:
    if resource.type == GKE_CLUSTER:
        config = block(resource, "workloadIdentityConfig")
        if is_unknown(config) or config.get("workloadPool"):
            return []
        return [
            "workloadIdentityConfig.workloadPool is not set, so pods can only act as the nodes' service account; "
            "set workloadPool to '<project>.svc.id.goog'"
        ]
    config = node_config(resource)
    metadata = block(resource, "nodeConfig", "workloadMetadataConfig") if isinstance(config, dict) else config
    if is_unknown(metadata) or (isinstance(metadata, dict) and metadata.get("mode") == "GKE_METADATA"):
        return []
    return [
        "nodeConfig.workloadMetadataConfig.mode is not GKE_METADATA, so pods on this pool read the node's "
        "credentials from the metadata server; set mode GKE_METADATA"
    ]


RULE = ResourceRule(
    NAME, "GKE clusters and node pools use Workload Identity.", "mandatory", (GKE_CLUSTER, GKE_NODE_POOL), check
)
