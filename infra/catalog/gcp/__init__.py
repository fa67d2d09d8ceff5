"""GCP machine facts and prices as typed, read-only data (data/gcp_machines.json), next to the EC2 catalog.

Pure library: no pulumi imports, no I/O until the first lookup. A price the table has no source for is
None, and callers say "unknown"; an unknown machine type is an error listing the closest known names.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class GcpAccelerator:
    model: str  # "L4", "H100"
    type: str  # the accelerator type GKE and Compute Engine name: "nvidia-l4", "nvidia-h100-80gb", ...
    count: int
    memory_gib: int  # per GPU


@dataclass(frozen=True)
class GcpMachineType:
    name: str
    vcpus: int
    memory_gib: int
    accelerator: GcpAccelerator
    gpu_nics: int  # NICs reserved for GPU-to-GPU traffic (GPUDirect-TCPX/TCPXO); 0 on G2
    gpu_networking: str | None  # "GPUDirect-TCPX", "GPUDirect-TCPXO" or None
    max_bandwidth_gbps: int | None  # None: not recorded
    zones: Mapping[str, tuple[str, ...]]
    host_price_excluding_gpu: float | None  # USD/h, vCPU and memory part only
    gpu_price: float | None  # USD/h per GPU; None: no sourced price
    price: float | None  # USD/h, the host with its GPUs; None: no sourced price

    @property
    def regions(self) -> tuple[str, ...]:
        return tuple(self.zones)

    def zones_in(self, region: str) -> tuple[str, ...] | None:
        """Zones of `region` offering the type; None when the catalog does not record the region (unknown)."""
        return self.zones.get(region)

    @classmethod
    def from_json(cls, name: str, raw: Mapping[str, Any]) -> GcpMachineType:
        acc = raw["accelerator"]
        return cls(
            name=name,
            vcpus=raw["vcpus"],
            memory_gib=raw["memoryGiB"],
            accelerator=GcpAccelerator(acc["model"], acc["type"], acc["count"], acc["memoryGiB"]),
            gpu_nics=raw["gpuNics"],
            gpu_networking=raw.get("gpuNetworking"),
            max_bandwidth_gbps=raw.get("maxBandwidthGbps"),
            zones=MappingProxyType({r: tuple(z) for r, z in sorted(raw["zones"].items())}),
            host_price_excluding_gpu=raw.get("hostPriceExcludingGpuPerHour"),
            gpu_price=raw.get("gpuPricePerHour"),
            price=raw.get("pricePerHour"),
        )


@dataclass(frozen=True)
class GcpHostType:
    """A machine type without accelerators (a cluster's system pool): its shape and its sourced price."""

    name: str
    vcpus: int
    memory_gib: int
    price: float  # USD/h, on demand, in the table's region
    source: str


class UnknownMachineType(LookupError):
    def __init__(self, name: str, known: tuple[str, ...]):
        self.name = name
        self.suggestions = tuple(difflib.get_close_matches(str(name).strip().lower(), known, n=3, cutoff=0.8))
        hint = ("closest known: " + ", ".join(self.suggestions)) if self.suggestions else "known: " + ", ".join(known)
        super().__init__(f"unknown GCP machine type {name!r}; {hint}")


@dataclass(frozen=True)
class _Table:
    source: str
    as_of: str
    price_source: str
    price_as_of: str
    region: str
    note: str
    rows: Mapping[str, GcpMachineType]
    services: Mapping[str, Mapping[str, Any]]
    no_charge: Mapping[str, str]
    hosts: Mapping[str, GcpHostType]


@functools.cache
def _table() -> _Table:
    raw = json.loads((files("infra.catalog") / "data" / "gcp_machines.json").read_text(encoding="utf-8"))
    rows = {name: GcpMachineType.from_json(name, item) for name, item in sorted(raw["machineTypes"].items())}
    return _Table(
        raw["source"],
        raw["asOf"],
        raw["priceSource"],
        raw["priceAsOf"],
        raw["region"],
        raw["note"],
        MappingProxyType(rows),
        MappingProxyType(dict(raw["services"])),
        MappingProxyType(dict(raw["noCharge"])),
        MappingProxyType(
            {
                name: GcpHostType(name, item["vcpus"], item["memoryGiB"], item["pricePerHour"], item["source"])
                for name, item in sorted(raw["generalPurposeTypes"].items())
            }
        ),
    )


def known_machine_types() -> tuple[str, ...]:
    return tuple(_table().rows)


def machine_type(name: str) -> GcpMachineType:
    try:
        return _table().rows[name]
    except (KeyError, TypeError):
        raise UnknownMachineType(str(name), known_machine_types()) from None


def general_purpose_type(name: str) -> GcpHostType | None:
    """The accelerator-less type `name` (the system pool's), or None when the table does not hold it."""
    return _table().hosts.get(name)


def on_demand_price(name: str) -> float | None:
    """USD per hour of the host with its GPUs, on demand, in the table's region; None without a sourced price."""
    return machine_type(name).price


def machine_table_source() -> tuple[str, str, str]:
    """(source, asOf, price region) of the GCP machine facts."""
    table = _table()
    return table.source, table.as_of, table.region


def price_table_source() -> tuple[str, str]:
    """(source, asOf) of the GCP machine prices."""
    table = _table()
    return table.price_source, table.price_as_of


def service_entries() -> Mapping[str, Mapping[str, Any]]:
    """GCP service prices (`gke.cluster`, ...) in the shape of aws_service_prices.json entries."""
    return _table().services


def no_charge_entries() -> Mapping[str, str]:
    return _table().no_charge
