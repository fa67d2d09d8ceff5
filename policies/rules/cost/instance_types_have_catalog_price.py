"""Every instance type a stack launches has a catalog price, so the cost ceiling covers it (types sold
only through Capacity Blocks or private pricing have none, and their cost is not checked)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.model import Finding, Stack, StackRule
from policies.rules.cost.stack_hourly_cost_under_ceiling import hourly_cost

NAME = "instance-types-have-catalog-price"


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    _, unpriced = hourly_cost(stack)
    return [
        Finding(
            resource.urn,
            f"{name} has no public on-demand price in the catalog, so the stack's cost "
            "ceiling does not cover it; check the Capacity Block or reservation price by hand",
        )
        for resource, name in unpriced
    ]


RULE = StackRule(
    NAME, "Launched instance types have catalog prices, so the cost ceiling can be checked.", "advisory", check
)
