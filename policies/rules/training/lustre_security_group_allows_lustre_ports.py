"""The security group of an FSx for Lustre file system admits TCP 988 and 1018-1023 (LNet), or
creating the file system fails."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.model import Finding, Stack, StackRule
from policies.readers.aws import LUSTRE, SECURITY_GROUP, group_rules, linked_of_type, span

NAME = "lustre-security-group-allows-lustre-ports"
LUSTRE_PORTS = (988, *range(1018, 1024))


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    findings = []
    for fs in stack.of_type(LUSTRE):
        groups = linked_of_type(stack, fs, ("securityGroupIds",), SECURITY_GROUP)
        if not groups and not fs.get("securityGroupIds"):
            findings.append(
                Finding(
                    fs.urn,
                    (
                        f"Lustre {fs.label} has no security group; set securityGroupIds to a group that admits "
                        "TCP 988 and 1018-1023 from itself and the nodes"
                    ),
                )
            )
        for group in groups:
            ingress = [r for r in group_rules(group, stack) if r.direction == "ingress"]
            missing = [p for p in LUSTRE_PORTS if not any(r.allows_tcp(p) for r in ingress)]
            if missing:
                findings.append(
                    Finding(
                        group.urn,
                        (
                            f"security group {group.label} of Lustre {fs.label} does not admit TCP {span(missing)}; "
                            "add ingress rules for TCP 988 and 1018-1023 from the group itself"
                        ),
                    )
                )
    return findings


RULE = StackRule(NAME, "Lustre security groups admit TCP 988 and 1018-1023.", "mandatory", check)
