"""Read-only lookups over the generated instance table and the curated price table."""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from types import MappingProxyType
from typing import Any

from infra.catalog.aws.model import InstanceType

# High enough that a one-character typo suggests its neighbours, not every "<x>.24xlarge".
_SUGGESTION_CUTOFF = 0.8


class UnknownInstanceType(LookupError):
    def __init__(self, name: str, known: tuple[str, ...]):
        self.name = name
        self.suggestions = tuple(difflib.get_close_matches(name.strip().lower(), known, n=3, cutoff=_SUGGESTION_CUTOFF))
        if self.suggestions:
            hint = "closest known: " + ", ".join(self.suggestions)
        else:
            hint = "known families: " + ", ".join(sorted({k.split(".")[0] for k in known}))
        super().__init__(f"unknown instance type {name!r}; {hint}")


@dataclass(frozen=True)
class _Table:
    source: str
    as_of: str
    rows: Mapping[str, Any]


def _load(filename: str) -> dict[str, Any]:
    return json.loads((files("infra.catalog") / "data" / filename).read_text(encoding="utf-8"))


@functools.cache
def _instances() -> _Table:
    raw = _load("aws_instances.json")
    rows = {name: InstanceType.from_json(item) for name, item in sorted(raw["instanceTypes"].items())}
    return _Table(raw["source"], raw["asOf"], MappingProxyType(rows))


@functools.cache
def _prices() -> _Table:
    raw = _load("aws_prices.json")
    return _Table(raw["source"], raw["asOf"], MappingProxyType(dict(raw["pricesPerHour"])))


def known_instance_types() -> tuple[str, ...]:
    return tuple(_instances().rows)


def instance_type(name: str) -> InstanceType:
    try:
        return _instances().rows[name]
    except (KeyError, TypeError):
        raise UnknownInstanceType(str(name), known_instance_types()) from None


def on_demand_price(name: str) -> float | None:
    """USD per hour, on demand, in the price table's region (us-east-1). None when there is no
    public price (capacity blocks / private pricing) or the type is not in the curated table."""
    instance_type(name)
    return _prices().rows.get(name)


def instance_table_source() -> tuple[str, str]:
    """(source, asOf) of the instance facts."""
    table = _instances()
    return table.source, table.as_of


def price_table_source() -> tuple[str, str]:
    """(source, asOf) of the prices."""
    table = _prices()
    return table.source, table.as_of
