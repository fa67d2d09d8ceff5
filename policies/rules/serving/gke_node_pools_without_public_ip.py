"""GKE node pools do not turn public node IPs back on (networkConfig.enablePrivateNodes false overrides a
private cluster for that pool)."""

from __future__ import annotations

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.gcp import GKE_NODE_POOL, block, flag

NAME = "gke-node-pools-without-public-ip"


def check(resource: Resource) -> list[str]:
    network = block(resource, "networkConfig")
    if is_unknown(network) or flag(network.get("enablePrivateNodes")) is not False:
        return []
    return [
        "networkConfig.enablePrivateNodes is false, so this pool's nodes get public IP addresses; remove it or "
        "set it true (nodes reach the internet through Cloud NAT)"
    ]


RULE = ResourceRule(
    NAME, "GKE node pools keep their nodes without public IP addresses.", "mandatory", (GKE_NODE_POOL,), check
)
