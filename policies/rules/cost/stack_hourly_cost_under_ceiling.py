"""A stack's most expensive hour stays under the configured ceiling (pack config `maxHourlyCostUsd`):
nodes at their catalog on-demand price x the most a resource may launch, plus Lustre storage."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infra.catalog.aws import on_demand_price
from infra.training.aws.lustre import HOURS_PER_MONTH, TIERS
from policies.model import Finding, Resource, Stack, StackRule
from policies.readers.aws import (
    AUTOSCALING_GROUP,
    EKS_NODE_GROUP,
    FLEET,
    INSTANCE,
    LAUNCH_TEMPLATE,
    LUSTRE,
    instance_types,
    linked_of_type,
    listed,
    number,
)

NAME = "stack-hourly-cost-under-ceiling"
DEFAULT_CEILING_USD = 1000.0


@dataclass(frozen=True)
class CostItem:
    resource: Resource
    what: str
    usd_per_hour: float


def _count(resource: Resource) -> Any:
    if resource.type == INSTANCE:
        return 1
    if resource.type == FLEET:
        spec = resource.get("targetCapacitySpecification")
        return number(spec.get("totalTargetCapacity")) if isinstance(spec, dict) else None
    if resource.type == AUTOSCALING_GROUP:
        return number(resource.get("maxSize"))
    if resource.type == EKS_NODE_GROUP:
        scaling = resource.get("scalingConfig")
        return number(scaling.get("maxSize")) if isinstance(scaling, dict) else None
    return None


def _types(resource: Resource, stack: Stack) -> list[str]:
    found = instance_types(resource, stack)
    if not found and resource.type in (AUTOSCALING_GROUP, EKS_NODE_GROUP):
        for template in linked_of_type(stack, resource, ("launchTemplate", "mixedInstancesPolicy"), LAUNCH_TEMPLATE):
            found.extend(instance_types(template))
    return found


def hourly_cost(stack: Stack) -> tuple[list[CostItem], list[tuple[Resource, str]]]:
    """(priced items, (resource, instance type) pairs without a catalog price). Several allowed types
    are priced at the most expensive one: the ceiling is about the worst hour."""
    items: list[CostItem] = []
    unpriced: list[tuple[Resource, str]] = []
    for resource in stack.of_type(INSTANCE, FLEET, AUTOSCALING_GROUP, EKS_NODE_GROUP):
        count = _count(resource)
        if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
            continue
        prices = []
        for name in _types(resource, stack):
            try:
                price = on_demand_price(name)
            except LookupError:
                continue  # unknown types are the role rules' findings
            if price is None:
                unpriced.append((resource, name))
            else:
                prices.append((price, name))
        if prices:
            price, name = max(prices)
            items.append(CostItem(resource, f"{count} x {name} at ${price:.2f}", count * price))
    for fs in stack.of_type(LUSTRE):
        capacity, per_unit = number(fs.get("storageCapacity")), number(fs.get("perUnitStorageThroughput"))
        tier = next(
            (
                t
                for t in TIERS
                if t.deployment_type == fs.get("deploymentType")
                and t.per_unit == per_unit
                and t.usd_per_gb_month is not None
            ),
            None,
        )
        if tier and tier.usd_per_gb_month is not None and isinstance(capacity, int):
            items.append(
                CostItem(fs, f"Lustre {capacity} GiB {tier.label}", capacity * tier.usd_per_gb_month / HOURS_PER_MONTH)
            )
    return items, unpriced


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    ceiling = float(config.get("maxHourlyCostUsd", DEFAULT_CEILING_USD))
    items, _ = hourly_cost(stack)
    total = sum(i.usd_per_hour for i in items)
    if total <= ceiling:
        return []
    parts = listed(
        [f"{i.resource.label}: {i.what} = ${i.usd_per_hour:.2f}" for i in sorted(items, key=lambda i: -i.usd_per_hour)],
        sep="; ",
    )
    return [
        Finding(
            "",
            f"the stack may cost ${total:.2f}/hour, over the ceiling of ${ceiling:.2f}/hour ({parts}); "
            "lower node counts or maximum sizes, or raise maxHourlyCostUsd in the pack config",
        )
    ]


RULE = StackRule(
    NAME,
    "The stack's hourly cost at catalog prices is under maxHourlyCostUsd.",
    "mandatory",
    check,
    config_schema={
        "maxHourlyCostUsd": {
            "type": "number",
            "exclusiveMinimum": 0,
            "default": DEFAULT_CEILING_USD,
            "description": "Most a stack may cost per hour at catalog on-demand prices, USD.",
        }
    },
)
