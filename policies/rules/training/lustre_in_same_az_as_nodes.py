"""FSx for Lustre lives in the nodes' AZ: cross-AZ reads add latency and inter-AZ transfer charges."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.model import Finding, Stack, StackRule, is_unknown
from policies.readers.aws import LUSTRE, SUBNET, linked_of_type, node_placements

NAME = "lustre-in-same-az-as-nodes"


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    node_azs = sorted({value for _, kind, value in node_placements(stack) if kind == "az"})
    if not node_azs:
        return []
    findings = []
    for fs in stack.of_type(LUSTRE):
        for subnet in linked_of_type(stack, fs, ("subnetIds",), SUBNET):
            az = subnet.get("availabilityZone")
            if isinstance(az, str) and not is_unknown(az) and az not in node_azs:
                findings.append(
                    Finding(
                        fs.urn,
                        (
                            f"Lustre {fs.label} is in {az} (subnet {subnet.label}) but the nodes are in "
                            f"{', '.join(node_azs)}; put the file system's subnet in the nodes' AZ"
                        ),
                    )
                )
    return findings


RULE = StackRule(NAME, "FSx for Lustre is in the same availability zone as the training nodes.", "mandatory", check)
