"""No security group admits the internet at large through CIDRs spread over several rule resources: ranges that
each admit less than the internet at large (infra.core.network.covers_internet: more than a /8's worth of public
addresses) in one `aws.vpc.SecurityGroupIngressRule` (or `aws.ec2.SecurityGroupRule`, or an inline block) and
another each pass a per-resource check, but together the group is open to that much of the internet.
`ingress-not-open-to-the-internet` sees one resource at a time; this rule sees the group."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.core.network import public_reach
from policies.model import Finding, Stack, StackRule
from policies.readers.aws import SECURITY_GROUP, group_rules, split_internet

NAME = "security-groups-not-open-across-rules"
_FIX = "allow the VPC CIDR or peer security groups instead"


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    findings = []
    for group in stack.of_type(SECURITY_GROUP):
        ingress = [r for r in group_rules(group, stack) if r.direction == "ingress" and r.cidrs]
        # Within one resource (one rule or the group's inline blocks) the resource rule already reports it.
        by_resource: dict[str, list[str]] = {}
        for rule in ingress:
            where = group.label if rule.where.startswith(f"{group.label} ingress[") else rule.where
            by_resource.setdefault(where, []).extend(rule.cidrs)
        if any(split_internet(cidrs) for cidrs in by_resource.values()):
            continue
        parts = split_internet([c for cidrs in by_resource.values() for c in cidrs])
        if not parts:
            continue
        sources = [where for where, cidrs in by_resource.items() if set(cidrs) & set(parts)]
        if len(sources) < 2:
            continue
        findings.append(
            Finding(
                group.urn,
                f"security group {group.label} admits {', '.join(parts)} through {', '.join(sources)}, which "
                f"together admit {public_reach(parts)}, the internet at large; {_FIX}",
            )
        )
    return findings


RULE = StackRule(
    NAME,
    "No security group admits the internet at large through CIDRs spread over several rules.",
    "mandatory",
    check,
)
