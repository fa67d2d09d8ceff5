"""GKE clusters are private clusters: their nodes get internal IP addresses only (egress through Cloud NAT)."""

from __future__ import annotations

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.gcp import GKE_CLUSTER, block, flag

NAME = "gke-nodes-private"


def check(resource: Resource) -> list[str]:
    private = block(resource, "privateClusterConfig")
    if is_unknown(private):
        return []
    if flag(private.get("enablePrivateNodes")) is True:
        return []
    return [
        "privateClusterConfig.enablePrivateNodes is not true, so every node gets a public IP address; set "
        "enablePrivateNodes true (with a masterIpv4CidrBlock) and give the nodes egress through Cloud NAT"
    ]


RULE = ResourceRule(
    NAME, "GKE clusters give their nodes private IP addresses only.", "mandatory", (GKE_CLUSTER,), check
)
