"""Instances with several network interfaces get no public IP: AWS refuses to launch them with one,
and training nodes reach the internet through NAT or endpoints."""

from __future__ import annotations

from policies.model import Resource, ResourceRule
from policies.readers.aws import LAUNCH_TEMPLATE, interfaces

NAME = "multi-interface-instances-without-public-ip"


def check(resource: Resource) -> list[str]:
    declared = interfaces(resource)
    if len(declared) < 2:
        return []
    return [
        f"networkInterfaces[{i}] sets associatePublicIpAddress with {len(declared)} interfaces; remove it "
        "(multi-interface instances cannot have a public IP; use a NAT gateway or VPC endpoints)"
        for i, ni in enumerate(declared)
        if ni.get("associatePublicIpAddress") in (True, "true")
    ]


RULE = ResourceRule(
    NAME,
    "Launch templates with several network interfaces associate no public IP.",
    "mandatory",
    (LAUNCH_TEMPLATE,),
    check,
)
