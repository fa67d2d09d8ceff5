"""GCP instances take no public addresses: no network interface has an access config (external IPv4) or an
IPv6 access config; nodes reach Google APIs through Private Google Access and the internet through Cloud NAT."""

from __future__ import annotations

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.gcp_training import INSTANCE

NAME = "gcp-instances-without-public-ip"


def check(resource: Resource) -> list[str]:
    nics = resource.get("networkInterfaces")
    if not isinstance(nics, list):
        return []
    findings = []
    for i, nic in enumerate(nics):
        if not isinstance(nic, dict):
            continue
        for key in ("accessConfigs", "ipv6AccessConfigs"):
            value = nic.get(key)
            if value and not is_unknown(value):
                findings.append(
                    f"networkInterfaces[{i}].{key} gives the instance a public address; remove it (nodes "
                    "reach Google APIs through Private Google Access and the internet through Cloud NAT)"
                )
    return findings


RULE = ResourceRule(
    NAME, "GCP instances have no public IP addresses (no access configs).", "mandatory", (INSTANCE,), check
)
