"""The security group of EFA interfaces admits all traffic from itself and sends all traffic to itself:
EFA's OS-bypass traffic is not TCP, and an egress to 0.0.0.0/0 alone does not satisfy EFA
(ParallelCluster EfaSecurityGroupValidator)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.model import Finding, Stack, StackRule
from policies.readers.aws import efa_templates, group_rules, template_groups

NAME = "efa-security-group-self-referencing"


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    findings: list[Finding] = []
    seen: set[str] = set()
    for template in efa_templates(stack):
        for group in template_groups(template, stack):
            if group.urn in seen:
                continue
            seen.add(group.urn)
            rules = group_rules(group, stack)
            for direction in ("ingress", "egress"):
                if not any(r.direction == direction and r.all_traffic and r.self_ref for r in rules):
                    peer = "from" if direction == "ingress" else "to"
                    findings.append(
                        Finding(
                            group.urn,
                            (
                                f"EFA security group {group.label} has no {direction} rule for all protocols "
                                f"{peer} itself; "
                                f"add one with protocol -1 whose peer is the group itself (0.0.0.0/0 does not "
                                f"satisfy EFA)"
                            ),
                        )
                    )
    return findings


RULE = StackRule(
    NAME, "Security groups of EFA interfaces allow all traffic to and from themselves.", "mandatory", check
)
