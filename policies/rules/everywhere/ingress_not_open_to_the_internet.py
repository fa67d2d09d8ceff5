"""No security group admits traffic from the internet at large: 0.0.0.0/0 or ::/0, any range with more than a /8's
worth of public addresses (0.0.0.0/1), or CIDRs that add up to that in one group's inline rules or one rule (the
internet less the private ranges, in pieces); judged on public address space (infra.core.network)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.core.network import public_reach
from policies.model import Resource, ResourceRule
from policies.readers.aws import (
    INGRESS_RULE,
    SECURITY_GROUP,
    SECURITY_GROUP_RULE,
    as_list,
    is_anywhere,
    split_internet,
)

NAME = "ingress-not-open-to-the-internet"
_FIX = "allow the VPC CIDR or peer security groups instead"


def check(resource: Resource) -> list[str]:
    problems = []
    if resource.type == SECURITY_GROUP:
        every = []
        for i, block in enumerate(as_list(resource.get("ingress"))):
            if isinstance(block, dict):
                for cidr in as_list(block.get("cidrBlocks")) + as_list(block.get("ipv6CidrBlocks")):
                    every.append(cidr)
                    if is_anywhere(cidr):
                        problems.append(f"ingress[{i}] admits {cidr} ({_ports(block, 'protocol')}); {_FIX}")
        problems += _split(every)
    elif resource.type == INGRESS_RULE:
        for field in ("cidrIpv4", "cidrIpv6"):
            if is_anywhere(resource.get(field)):
                problems.append(
                    f"{field} {resource.get(field)} admits the internet "
                    f"({_ports(resource.props, 'ipProtocol')}); {_FIX}"
                )
    elif resource.type == SECURITY_GROUP_RULE and resource.get("type") == "ingress":
        cidrs = as_list(resource.get("cidrBlocks")) + as_list(resource.get("ipv6CidrBlocks"))
        for cidr in cidrs:
            if is_anywhere(cidr):
                problems.append(f"ingress rule admits {cidr} ({_ports(resource.props, 'protocol')}); {_FIX}")
        problems += _split(cidrs)
    return problems


def _split(cidrs: list[Any]) -> list[str]:
    parts = split_internet(cidrs)
    if not parts:
        return []
    return [
        f"ingress admits {', '.join(parts)}, which together admit {public_reach(parts)}, the internet at large; {_FIX}"
    ]


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
