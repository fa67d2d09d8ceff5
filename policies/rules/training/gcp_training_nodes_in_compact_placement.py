"""Every GCP training node is in a compact placement policy of the stack (groupPlacementPolicy collocation
COLLOCATED) whose vmCount is the number of nodes in it, so the nodes land close together on the network."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.model import Finding, Stack, StackRule, is_unknown
from policies.readers.gcp import block
from policies.readers.gcp_training import INSTANCE, RESOURCE_POLICY, is_training

NAME = "gcp-training-nodes-in-compact-placement"


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    nodes = [r for r in stack.of_type(INSTANCE) if is_training(r)]
    members: dict[str, list] = {}
    findings = []
    for node in nodes:
        if is_unknown(node.get("resourcePolicies")) and not node.property_dependencies:
            continue
        policies = [p for p in stack.linked(node, "resourcePolicies") if p.type == RESOURCE_POLICY]
        compact = [p for p in policies if block(p, "groupPlacementPolicy").get("collocation") == "COLLOCATED"]
        if not compact:
            findings.append(
                Finding(
                    node.urn,
                    (
                        f"training node {node.label} is in no compact placement policy; set resourcePolicies to a "
                        f"{RESOURCE_POLICY} with groupPlacementPolicy collocation COLLOCATED and vmCount = the "
                        f"node count"
                    ),
                )
            )
            continue
        members.setdefault(compact[0].urn, []).append(node)
    for urn, in_policy in members.items():
        policy = stack.get(urn)
        if policy is None:
            continue
        count = block(policy, "groupPlacementPolicy").get("vmCount")
        if not is_unknown(count) and count is not None and count != len(in_policy):
            findings.append(
                Finding(
                    urn,
                    (
                        f"placement policy {policy.label} has vmCount {count} but {len(in_policy)} training "
                        f"nodes use it; "
                        f"set vmCount {len(in_policy)}"
                    ),
                )
            )
    return findings


RULE = StackRule(NAME, "GCP training nodes share a compact placement policy sized to them.", "mandatory", check)
