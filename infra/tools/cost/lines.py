"""Priced lines of one resource, built the same way by every pricer: a resource at an hourly service price, or
priced by usage (shown, not added)."""

from __future__ import annotations

from infra.catalog.services import hours_per_month, service_price
from infra.tools.cost.model import Line
from infra.tools.cost.resources import Resources
from infra.tools.preview_json import PolicyResource


def line(r: PolicyResource, res: Resources, group: str, **fields) -> Line:
    return Line(resource=r.name, type=r.type, component=res.component(r), group=group, **fields)


def hourly(
    r: PolicyResource,
    res: Resources,
    group: str,
    key: str,
    quantity: float,
    what: str,
    per_month: bool = False,
    usage: tuple[str, ...] = (),
) -> Line:
    price = service_price(key)
    usage_prices = tuple(service_price(k) for k in usage)
    if price.usd is None:  # no sourced price: said, never estimated
        return line(r, res, group, basis="unknown", what=f"{what}: no sourced price ({key})", price_keys=(key, *usage))
    per_hour = quantity * price.usd / (hours_per_month() if per_month else 1)
    return line(
        r,
        res,
        group,
        basis="hourly",
        low=per_hour,
        high=per_hour,
        what=f"{what} at {price.per_unit()}",
        unit_prices=tuple(p.per_unit() for p in usage_prices),
        price_keys=(key, *usage),
    )


def usage(r: PolicyResource, res: Resources, group: str, what: str, *keys: str) -> Line:
    prices = [service_price(k) for k in keys]
    return line(
        r, res, group, basis="usage", what=what, unit_prices=tuple(p.per_unit() for p in prices), price_keys=keys
    )
