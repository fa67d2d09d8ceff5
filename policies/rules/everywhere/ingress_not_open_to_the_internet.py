"""No security group admits traffic from the whole internet (0.0.0.0/0 or ::/0)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.model import Resource, ResourceRule
from policies.readers.aws import INGRESS_RULE, SECURITY_GROUP, SECURITY_GROUP_RULE, as_list, is_anywhere

NAME = "ingress-not-open-to-the-internet"
_FIX = "allow the VPC CIDR or peer security groups instead"


def check(resource: Resource) -> list[str]:
    problems = []
    if resource.type == SECURITY_GROUP:
        for i, block in enumerate(as_list(resource.get("ingress"))):
            if isinstance(block, dict):
                for cidr in as_list(block.get("cidrBlocks")) + as_list(block.get("ipv6CidrBlocks")):
                    if is_anywhere(cidr):
                        problems.append(f"ingress[{i}] admits {cidr} ({_ports(block, 'protocol')}); {_FIX}")
    elif resource.type == INGRESS_RULE:
        for field in ("cidrIpv4", "cidrIpv6"):
            if is_anywhere(resource.get(field)):
                problems.append(
                    f"{field} {resource.get(field)} admits the internet "
                    f"({_ports(resource.props, 'ipProtocol')}); {_FIX}"
                )
    elif resource.type == SECURITY_GROUP_RULE and resource.get("type") == "ingress":
        for cidr in as_list(resource.get("cidrBlocks")) + as_list(resource.get("ipv6CidrBlocks")):
            if is_anywhere(cidr):
                problems.append(f"ingress rule admits {cidr} ({_ports(resource.props, 'protocol')}); {_FIX}")
    return problems


def _ports(block: Mapping[str, Any], protocol_key: str) -> str:
    protocol = str(block.get(protocol_key, "")).lower()
    if protocol in ("-1", "all"):
        return "all traffic"
    low, high = block.get("fromPort"), block.get("toPort")
    return f"{protocol} {low}" if low == high else f"{protocol} {low}-{high}"


RULE = ResourceRule(
    NAME,
    "Security groups admit no ingress from 0.0.0.0/0 or ::/0.",
    "mandatory",
    (SECURITY_GROUP, INGRESS_RULE, SECURITY_GROUP_RULE),
    check,
)
