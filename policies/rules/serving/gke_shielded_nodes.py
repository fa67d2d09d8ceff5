"""GKE nodes are Shielded VMs with secure boot and integrity monitoring (verifiable boot, no rootkits)."""

from __future__ import annotations

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.gcp import GKE_CLUSTER, GKE_NODE_POOL, block, flag

NAME = "gke-shielded-nodes"


def check(resource: Resource) -> list[str]:
    if resource.type == GKE_CLUSTER:
        if flag(resource.get("enableShieldedNodes")) is False:
            return ["enableShieldedNodes is false; set it true so every node proves its identity with a Shielded VM"]
        return []
    shielded = block(resource, "nodeConfig", "shieldedInstanceConfig")
    if is_unknown(shielded):
        return []
    found = []
    if flag(shielded.get("enableSecureBoot")) is not True:
        found.append(
            "nodeConfig.shieldedInstanceConfig.enableSecureBoot is not true (GKE's default is off); set it "
            "true so nodes boot only signed components"
        )
    if flag(shielded.get("enableIntegrityMonitoring")) is False:
        found.append("nodeConfig.shieldedInstanceConfig.enableIntegrityMonitoring is false; set it true")
    return found


RULE = ResourceRule(
    NAME, "GKE nodes are Shielded VMs with secure boot.", "mandatory", (GKE_CLUSTER, GKE_NODE_POOL), check
)
