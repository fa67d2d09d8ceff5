"""Instances and their root volumes: EC2 Fleets, EKS node groups, Auto Scaling groups, plain instances."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.catalog.aws import UnknownInstanceType, on_demand_price
from infra.catalog.services import hours_per_month, service_price
from infra.core.shapes import dict_at, list_at
from infra.providers import tokens
from infra.serving.scheduling import FALLBACK_LABEL
from infra.tools.cost.model import Line
from infra.tools.cost.resources import Resources, whole
from infra.tools.preview_json import PolicyResource

INSTANCE = tokens.AWS_EC2_INSTANCE
FLEET = tokens.AWS_EC2_FLEET
NODE_GROUP = tokens.AWS_EKS_NODE_GROUP
AUTOSCALING_GROUP = tokens.AWS_AUTOSCALING_GROUP
LAUNCH_TEMPLATE = tokens.AWS_EC2_LAUNCH_TEMPLATE
COMPUTE_TYPES = (INSTANCE, FLEET, NODE_GROUP, AUTOSCALING_GROUP)


@dataclass(frozen=True)
class Capacity:
    types: tuple[str, ...]
    low: int  # nodes at the lower bound
    high: int  # nodes at the upper bound
    market: str  # "on-demand" | "spot" | "capacity-block"
    template: PolicyResource | None
    root_volume: dict  # the instance's own root block device, when it declares one
    fallback: bool = False  # on-demand nodes that stand in for a Spot group's (counted at that group's bound)

    @property
    def counted_high(self) -> int:
        """Nodes counted at the upper bound: a fallback's run in place of its Spot group's, whose bound is already
        at the on-demand price, so they add none."""
        return 0 if self.fallback else self.high


def compute_lines(resource: PolicyResource, res: Resources) -> list[Line]:
    capacity = _capacity(resource, res)
    if capacity is None:
        return []
    component = res.component(resource)
    return [_instances(resource, component, capacity), *_volumes(resource, component, capacity)]


def _capacity(r: PolicyResource, res: Resources) -> Capacity | None:
    p = r.props
    fallback = False
    if r.type == FLEET:
        spec = dict_at(p, "targetCapacitySpecification")
        count = whole(spec.get("totalTargetCapacity"))
        configs = list_at(p, "launchTemplateConfigs")
        types = [
            o.get("instanceType")
            for c in configs
            if isinstance(c, dict)
            for o in list_at(c, "overrides")
            if isinstance(o, dict)
        ]
        template = _template(r, res, "launchTemplateConfigs")
        market = str(spec.get("defaultTargetCapacityType") or "on-demand")
        low = high = count
    elif r.type == NODE_GROUP:
        scaling = dict_at(p, "scalingConfig")
        low, high = whole(scaling.get("minSize")), whole(scaling.get("maxSize"))
        types = list_at(p, "instanceTypes")
        template = _template(r, res, "launchTemplate")
        market = "spot" if p.get("capacityType") == "SPOT" else "on-demand"
        fallback = dict_at(p, "labels").get(FALLBACK_LABEL) == "true"
    elif r.type == AUTOSCALING_GROUP:
        low, high = whole(p.get("minSize")), whole(p.get("maxSize"))
        types = [
            o.get("instanceType")
            for o in list_at(dict_at(p, "mixedInstancesPolicy", "launchTemplate"), "overrides")
            if isinstance(o, dict)
        ]
        template = _template(r, res, "launchTemplate", "mixedInstancesPolicy")
        market = "on-demand"
    else:  # INSTANCE
        low = high = 1
        types = [p.get("instanceType")]
        template = _template(r, res, "launchTemplate")
        market = "spot" if p.get("instanceMarketOptions") else "on-demand"
    names = [t for t in types if isinstance(t, str)]
    if not names and template is not None and isinstance(template.props.get("instanceType"), str):
        names = [template.props["instanceType"]]
    if low is None or high is None or not names:
        return None
    root = dict_at(p, "rootBlockDevice") if r.type == INSTANCE else {}
    return Capacity(tuple(dict.fromkeys(names)), low, high, market, template, root, fallback)


def _template(r: PolicyResource, res: Resources, *keys: str) -> PolicyResource | None:
    found = res.linked(r, LAUNCH_TEMPLATE, keys)
    return found[0] if found else None


def _instances(r: PolicyResource, component: str, c: Capacity) -> Line:
    base: dict[str, Any] = dict(resource=r.name, type=r.type, component=component, group="compute")
    prices: list[tuple[float, str]] = []
    missing: list[str] = []
    for name in c.types:
        try:
            price = on_demand_price(name)
        except UnknownInstanceType:
            missing.append(f"{name} (not in the instance catalog)")
            continue
        if price is None:
            missing.append(f"{name} (no public price)")
        else:
            prices.append((price, name))
    nodes = f"{c.low}" if c.low == c.high else f"{c.low}-{c.high}"
    if c.market == "capacity-block":
        reference = f"; on demand it would be ${c.high * max(prices)[0]:.2f}/h" if prices else ""
        return Line(
            **base,
            basis="unknown",
            nodes=c.high,
            what=f"{nodes} x {'/'.join(c.types)} in a Capacity Block: unknown (no public price: paid up front "
            f"at the block's own price){reference}",
        )
    if not prices:
        return Line(
            **base, basis="unknown", nodes=c.high, what=f"{nodes} x {'/'.join(c.types)}: unknown ({', '.join(missing)})"
        )
    cheapest, dearest = min(prices), max(prices)
    if cheapest == dearest:
        what = f"{nodes} x {dearest[1]} at ${dearest[0]:.3f}/h"
    else:
        what = f"{c.low} x {cheapest[1]} at ${cheapest[0]:.3f}/h to {c.high} x {dearest[1]} at ${dearest[0]:.3f}/h"
    if c.market == "spot":
        what += " (spot: billed at the market price, at most the on-demand price shown)"
    if missing:
        what += f"; not priced: {', '.join(missing)}"
    if c.fallback:
        what += " (on-demand fallback behind its Spot group: runs in place of that group's nodes, counted there)"
    return Line(
        **base,
        basis="hourly",
        what=what,
        low=c.low * cheapest[0],
        high=c.counted_high * dearest[0],
        nodes=c.high,
        node_usd=dearest[0],
    )


def _volumes(r: PolicyResource, component: str, c: Capacity) -> list[Line]:
    mappings = [dict_at(m, "ebs") for m in list_at(c.template.props, "blockDeviceMappings")] if c.template else []
    if c.root_volume:
        mappings.append(c.root_volume)
    lines = []
    for ebs in mappings:
        size = whole(ebs.get("volumeSize"))
        if not size:
            continue
        kind = str(ebs.get("volumeType") or "gp2")
        base: dict[str, Any] = dict(resource=r.name, type=r.type, component=component, group="storage")
        nodes = f"{c.low}" if c.low == c.high else f"{c.low}-{c.high}"
        try:
            price = service_price(f"ebs.{kind}.storage")
        except KeyError:
            price = None
        if price is None or price.usd is None:
            lines.append(
                Line(
                    **base, basis="unknown", what=f"{nodes} x {size} GiB {kind} volumes: unknown (no price for {kind})"
                )
            )
            continue
        per_node = size * price.usd / hours_per_month()
        lines.append(
            Line(
                **base,
                basis="hourly",
                low=c.low * per_node,
                high=c.counted_high * per_node,
                what=f"{nodes} x {size} GiB {kind} volumes at ${price.usd:g}/GB-month"
                + (" (in place of its Spot group's, counted there)" if c.fallback else ""),
                price_keys=(price.key,),
            )
        )
    return lines
