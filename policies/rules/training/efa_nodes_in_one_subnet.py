"""All EFA nodes sit in one subnet, hence one AZ: the fabric does not cross AZs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.model import Finding, Stack, StackRule
from policies.readers.aws import listed, node_placements

NAME = "efa-nodes-in-one-subnet"


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    findings = []
    for kind, what in (("subnet", "subnets"), ("az", "availability zones")):
        values = sorted({value for _, k, value in node_placements(stack) if k == kind})
        if len(values) > 1:
            findings.append(
                Finding(
                    "",
                    f"EFA nodes span {len(values)} {what} ({listed(values)}); put every "
                    "node in one subnet of one AZ (the EFA fabric does not cross AZs)",
                )
            )
    return findings


RULE = StackRule(NAME, "All EFA nodes are in one subnet and one availability zone.", "mandatory", check)
