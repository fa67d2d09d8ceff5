"""Placement follows the capacity mode: on-demand EFA nodes launch into an explicit `cluster` placement
group; Capacity Blocks for ML place instances themselves and take no placement group of your own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.core.shapes import dict_at
from policies.model import Finding, Resource, Stack, StackRule, is_unknown
from policies.readers.aws import PLACEMENT_GROUP, efa_templates, linked_of_type

NAME = "placement-group-matches-capacity-mode"


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    findings = []
    for template in efa_templates(stack):
        placement = dict_at(template.get("placement"))
        groups = linked_of_type(stack, template, ("placement",), PLACEMENT_GROUP)
        named = bool(groups) or any(placement.get(k) for k in ("groupName", "groupId"))
        if _capacity_block(template):
            if named:
                findings.append(
                    Finding(
                        template.urn,
                        (
                            f"{template.label} launches into a Capacity Block but also names a placement group; remove "
                            "placement.groupName/groupId (Capacity Blocks place the instances themselves)"
                        ),
                    )
                )
        elif not _reservation(template):
            if not named:
                findings.append(
                    Finding(
                        template.urn,
                        (
                            f"{template.label} launches on-demand EFA nodes without a placement group; set "
                            "placement.groupName to a PlacementGroup with strategy 'cluster'"
                        ),
                    )
                )
            for group in groups:
                strategy = group.get("strategy")
                if strategy != "cluster" and not is_unknown(strategy):
                    findings.append(
                        Finding(
                            template.urn,
                            (
                                f"{template.label} uses placement group {group.label} with strategy {strategy!r}; "
                                "on-demand EFA nodes need strategy 'cluster'"
                            ),
                        )
                    )
    if any(_capacity_block(t) for t in efa_templates(stack)):
        for group in stack.of_type(PLACEMENT_GROUP):
            findings.append(
                Finding(
                    group.urn,
                    (
                        f"placement group {group.label} in a Capacity Block stack; remove it (Capacity Blocks bring "
                        "their own placement, and an unused group only fails teardown)"
                    ),
                )
            )
    return findings


def _capacity_block(template: Resource) -> bool:
    options = template.get("instanceMarketOptions")
    return isinstance(options, dict) and options.get("marketType") == "capacity-block"


def _reservation(template: Resource) -> bool:
    spec = template.get("capacityReservationSpecification")
    return isinstance(spec, dict) and bool(spec.get("capacityReservationTarget"))


RULE = StackRule(
    NAME, "On-demand EFA nodes use a cluster placement group; Capacity Blocks use none.", "mandatory", check
)
