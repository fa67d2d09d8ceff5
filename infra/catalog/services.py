"""Prices of the non-instance services stacks declare (FSx, EKS, VPC, EBS, Lambda, ...), as typed data.

Read from `data/aws_service_prices.json`: one entry per price with its unit, source and as-of date, and
the resource types that carry no charge. Pure library: no I/O until the first lookup.
"""

from __future__ import annotations

import fnmatch
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from types import MappingProxyType


@dataclass(frozen=True)
class ServicePrice:
    key: str
    usd: float | None  # None: no sourced price (say so; never estimate)
    unit: str
    source: str
    as_of: str

    def per_unit(self) -> str:
        """'$0.045 per GB processed'; tiny per-request prices per 1,000, 10,000 or 1M, as AWS quotes them."""
        if self.usd is None:
            return f"unknown per {self.unit}"
        if self.usd == 0:
            return f"$0 per {self.unit}"
        scales = ((1_000_000, "1M "),) if 0 < self.usd <= 1e-6 else ((1, ""), (1_000, "1,000 "), (10_000, "10,000 "))
        for scale, label in scales:
            if self.usd * scale >= 0.005 or "second" in self.unit or scale > 1_000:
                plural = "s" if scale > 1 else ""
                return f"${self.usd * scale:.10f}".rstrip("0").rstrip(".") + f" per {label}{self.unit}{plural}"
        return f"${self.usd:g} per {self.unit}"


@dataclass(frozen=True)
class _ServiceTable:
    region: str
    hours_per_month: int
    prices: Mapping[str, ServicePrice]
    no_charge: Mapping[str, str]


@functools.cache
def _table() -> _ServiceTable:
    raw = json.loads((files("infra.catalog") / "data" / "aws_service_prices.json").read_text(encoding="utf-8"))
    from infra.catalog.gcp import no_charge_entries, service_entries  # GCP's entries (gcp_machines.json)

    entries = {**raw["prices"], **service_entries()}
    prices = {
        key: ServicePrice(key, item["usd"], item["unit"], item["source"], item["asOf"])
        for key, item in sorted(entries.items())
    }
    return _ServiceTable(
        raw["region"],
        int(raw["hoursPerMonth"]),
        MappingProxyType(prices),
        MappingProxyType({**raw["noCharge"], **no_charge_entries()}),
    )


def service_price(key: str) -> ServicePrice:
    """The entry for `key` (e.g. "vpc.natGateway.hour"); KeyError names the known keys."""
    try:
        return _table().prices[key]
    except KeyError:
        raise KeyError(f"no service price {key!r}; known: {', '.join(_table().prices)}") from None


def lustre_price_key(deployment_type: str, per_unit_throughput: int | None) -> str:
    """The price key of an FSx for Lustre (SSD) deployment type and per-unit throughput (MB/s/TiB)."""
    return f"fsx.lustre.{deployment_type}" + (f".{per_unit_throughput}" if per_unit_throughput else "")


def no_charge_reason(resource_type: str) -> str | None:
    """Why a resource of this type carries no charge of its own, or None if it is not listed as free."""
    table = _table().no_charge
    if resource_type in table:
        return table[resource_type]
    return next(
        (why for pattern, why in table.items() if "*" in pattern and fnmatch.fnmatchcase(resource_type, pattern)), None
    )


def service_price_region() -> str:
    return _table().region


def hours_per_month() -> int:
    return _table().hours_per_month


def service_price_keys() -> tuple[str, ...]:
    return tuple(_table().prices)
