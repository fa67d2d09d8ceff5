"""Accelerator facts for serving, as typed read-only data (data/accelerators.json), joined with the instance
catalogs of both clouds: which device a serving type carries, how many, its memory, bandwidth and peak
throughput per number format, which weight/activation/KV-cache formats it supports, and the type's price.

One vocabulary of number formats (fp32, bf16, fp16, fp8, int8, int4) with their bytes per element, and named
precisions (weights, activations, KV cache) over it: the fit check, the performance model and the quantised
variants all key on these, never on a variant's or a type's name. Instance shapes and prices stay in their own
catalogs (aws_instances.json, aws_prices.json, gcp_machines.json); nothing is repeated here.

Pure library: no pulumi imports, no I/O until the first lookup.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from importlib.resources import files
from types import MappingProxyType
from typing import Any, Literal

from infra.catalog import gcp as gcp_catalog
from infra.catalog.aws import instance_type, on_demand_price
from infra.catalog.roles import types_for

Cloud = Literal["aws", "gcp"]
MIB = 1024**2
GIB = 1024**3


class UnknownAcceleratorFact(LookupError):
    """A device, format, precision or serving type the accelerator table does not hold."""


@dataclass(frozen=True)
class Precision:
    """The number formats of one way of serving a model: weights, activations (what the matrix units compute
    in) and the KV cache."""

    name: str
    weights: str
    activations: str
    kv_cache: str

    def with_kv_cache(self, fmt: str) -> Precision:
        """The same precision with another KV-cache format (e.g. fp8 KV on an fp8-capable device)."""
        format_bytes(fmt)
        return replace(self, name=f"{self.name}+kv-{fmt}" if fmt != self.kv_cache else self.name, kv_cache=fmt)


@dataclass(frozen=True)
class Device:
    name: str  # "T4", "A10G", "L4", "L40S", "Inferentia2", "A100-40GB", "A100-80GB"
    vendor: str
    kind: Literal["gpu", "neuron"]
    architecture: str
    compute_capability: float | None  # CUDA compute capability (kernels name a minimum); None off NVIDIA
    catalog_names: Mapping[str, str]  # cloud -> the name the cloud's instance catalog gives the device
    engine_shards: int  # tensor-parallel shards the engine makes of one device (2 NeuronCores per Inferentia2)
    memory_mib: int  # what a process on one device can address
    memory_bandwidth_gbps: float  # GB/s (10^9 bytes per second)
    dense_tflops: Mapping[str, float | None]  # per format; None: no such unit
    compute_formats: tuple[str, ...]
    weight_formats: tuple[str, ...]
    kv_cache_formats: tuple[str, ...]
    source: str
    as_of: str

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * MIB

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / 1024

    def peak_flops(self, fmt: str) -> float:
        """Dense peak in FLOP/s (or OP/s for integers) for matrix work in `fmt`; 0 when the device has none."""
        return (self.dense_tflops.get(fmt) or 0.0) * 1e12

    def unsupported(self, precision: Precision) -> str | None:
        """Why this device cannot serve `precision` (naming the device and the format), or None."""
        what = f"{self.name} ({self.architecture})"
        if precision.activations not in self.compute_formats:
            return f"{what} has no {precision.activations} compute; it computes in {', '.join(self.compute_formats)}"
        if precision.weights not in self.weight_formats:
            formats = ", ".join(self.weight_formats)
            return f"{what} cannot hold weights in {precision.weights}; its weight formats: {formats}"
        if precision.kv_cache not in self.kv_cache_formats:
            return (
                f"{what} cannot keep the KV cache in {precision.kv_cache}; its KV-cache formats: "
                f"{', '.join(self.kv_cache_formats)}"
            )
        return None


@dataclass(frozen=True)
class RuntimeMemory:
    """What the serving engine makes of a device's memory: the share it takes (vLLM's gpu_memory_utilization),
    and the runtime's own overhead per device inside that share (context, graphs, activation peak)."""

    utilization: float
    overhead_gib_per_device: float


@dataclass(frozen=True)
class ServingOffer:
    """One instance type of a cloud that serves models: its device, how many, host shape and price."""

    cloud: Cloud
    instance_type: str
    device: Device
    devices: int
    vcpus: int
    memory_gib: float
    price_per_hour: float | None  # USD on demand (us-east-1 / us-central1); None: no sourced price

    @property
    def label(self) -> str:
        return f"{self.cloud}:{self.instance_type}"


@dataclass(frozen=True)
class _Table:
    source: str
    as_of: str
    formats: Mapping[str, float]
    precisions: Mapping[str, Precision]
    devices: Mapping[str, Device]
    by_catalog_name: Mapping[tuple[str, str], str]
    runtime: Mapping[str, RuntimeMemory]


def _device(name: str, raw: Mapping[str, Any]) -> Device:
    return Device(
        name=name,
        vendor=raw["vendor"],
        kind=raw["kind"],
        architecture=raw["architecture"],
        compute_capability=None if raw["computeCapability"] is None else float(raw["computeCapability"]),
        catalog_names=MappingProxyType(dict(raw["catalogNames"])),
        engine_shards=raw["engineShardsPerDevice"],
        memory_mib=raw["memoryMiB"],
        memory_bandwidth_gbps=raw["memoryBandwidthGBps"],
        dense_tflops=MappingProxyType(dict(raw["denseTflops"])),
        compute_formats=tuple(raw["computeFormats"]),
        weight_formats=tuple(raw["weightFormats"]),
        kv_cache_formats=tuple(raw["kvCacheFormats"]),
        source=raw["source"],
        as_of=raw["asOf"],
    )


@functools.cache
def _table() -> _Table:
    raw = json.loads((files("infra.catalog") / "data" / "accelerators.json").read_text(encoding="utf-8"))
    devices = {name: _device(name, item) for name, item in raw["devices"].items()}
    return _Table(
        source=raw["source"],
        as_of=raw["asOf"],
        formats=MappingProxyType({name: float(item["bytes"]) for name, item in raw["formats"].items()}),
        precisions=MappingProxyType(
            {
                name: Precision(name, item["weights"], item["activations"], item["kvCache"])
                for name, item in raw["precisions"].items()
            }
        ),
        devices=MappingProxyType(devices),
        by_catalog_name=MappingProxyType(
            {
                (cloud, catalog): name
                for name, item in raw["devices"].items()
                for cloud, catalog in item["catalogNames"].items()
            }
        ),
        runtime=MappingProxyType(
            {
                kind: RuntimeMemory(item["memoryUtilization"], item["overheadGiBPerDevice"])
                for kind, item in raw["runtime"].items()
                if kind in ("gpu", "neuron")
            }
        ),
    )


def _unknown(what: str, name: object, known: tuple[str, ...]) -> UnknownAcceleratorFact:
    close = difflib.get_close_matches(str(name), known, n=3, cutoff=0.6)
    hint = f"closest known: {', '.join(close)}" if close else f"known: {', '.join(known)}"
    return UnknownAcceleratorFact(f"unknown {what} {name!r}; {hint}")


def format_names() -> tuple[str, ...]:
    return tuple(_table().formats)


def format_bytes(fmt: str) -> float:
    """Bytes per element of a number format (int4: 0.5)."""
    try:
        return _table().formats[fmt]
    except KeyError:
        raise _unknown("number format", fmt, format_names()) from None


def precision_names() -> tuple[str, ...]:
    return tuple(_table().precisions)


def precision(name: str) -> Precision:
    try:
        return _table().precisions[name]
    except KeyError:
        raise _unknown("precision", name, precision_names()) from None


def device_names() -> tuple[str, ...]:
    return tuple(_table().devices)


def device(name: str) -> Device:
    try:
        return _table().devices[name]
    except KeyError:
        raise _unknown("accelerator", name, device_names()) from None


def runtime_memory(kind: str) -> RuntimeMemory:
    """How much of a device of `kind` ("gpu", "neuron") the serving engine takes, and its own overhead."""
    return _table().runtime[kind]


def table_source() -> tuple[str, str]:
    table = _table()
    return table.source, table.as_of


def _aws_offer(name: str) -> ServingOffer | None:
    it = instance_type(name)
    device_name = _table().by_catalog_name.get(("aws", it.accelerator_model or ""))
    if device_name is None:
        return None
    return ServingOffer(
        "aws", name, device(device_name), it.accelerator_count, it.vcpus, it.memory_mib / 1024, on_demand_price(name)
    )


def _gcp_offer(name: str) -> ServingOffer | None:
    mt = gcp_catalog.machine_type(name)
    device_name = _table().by_catalog_name.get(("gcp", mt.accelerator.type))
    if device_name is None:
        return None
    return ServingOffer("gcp", name, device(device_name), mt.accelerator.count, mt.vcpus, mt.memory_gib, mt.price)


@functools.cache
def serving_offers() -> tuple[ServingOffer, ...]:
    """Every serving type of both clouds with its device: AWS's serving types (roles.json), and the GCP
    machine types whose accelerator has facts here (G2 L4, A2 A100; A3's H100 is a training type)."""
    offers = [_aws_offer(name) for name in types_for("serving")]
    offers += [_gcp_offer(name) for name in gcp_catalog.known_machine_types()]
    return tuple(o for o in offers if o is not None)


def serving_offer(cloud: str, name: str) -> ServingOffer:
    """The offer of `name` on `cloud`; UnknownAcceleratorFact names the close serving types."""
    found: dict[tuple[str, str], ServingOffer] = {(o.cloud, o.instance_type): o for o in serving_offers()}
    offer = found.get((cloud, name))
    if offer is None:
        raise _unknown(f"{cloud} serving type", name, tuple(n for c, n in found if c == cloud))
    return offer


def device_of(cloud: str, name: str) -> Device:
    return serving_offer(cloud, name).device
