"""Fabric facts as data (data/fabric.json): the all-reduce bus bandwidth each training type must reach before
its job starts, with the basis of each floor, and on GCP the NCCL network plugin its GPU NICs need.

Pure library: no pulumi imports, no I/O until the first lookup.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from types import MappingProxyType
from typing import Any, Literal

Cloud = Literal["aws", "gcp"]


@dataclass(frozen=True)
class FabricFloor:
    """The fabric gate's floor for one machine type: measured bus bandwidth below it fails the run."""

    machine_type: str
    line_rate_gbps: float  # GB/s between nodes: the basis of the floor
    min_bus_bandwidth_gbps: float
    published: Mapping[str, Any] | None  # a published healthy figure and its source, where one was found


@dataclass(frozen=True)
class GcpNetPlugin:
    """What NCCL needs on an A3 machine to use its GPU NICs (GPUDirect-TCPX or -TCPXO), as Google documents it."""

    networking: str  # "GPUDirect-TCPX" / "GPUDirect-TCPXO"
    net_name: str  # NCCL_NET: NCCL uses this plugin or fails, never its own sockets
    lib_dir: str
    plugin_file: str
    env: Mapping[str, str]  # fixed NCCL settings from Google's recipe
    rxdm_socket_dir: str | None  # TCPX: the receive-datapath manager's unix sockets
    env_profile: str | None  # TCPXO: the plugin's own settings script, in lib_dir
    llcm_device_dir: str | None  # TCPXO: NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY
    cpu_bindings: tuple[tuple[str, ...], tuple[str, ...]] | None  # (tx, rx) CPU lists per GPU NIC, in NIC order
    source: str


@dataclass(frozen=True)
class _Table:
    as_of: str
    measure: str
    floor_basis: str
    neuron_measure: str
    message_bytes: int
    floors: Mapping[tuple[str, str], FabricFloor]
    plugins: Mapping[str, GcpNetPlugin]


class UnknownFabric(LookupError):
    def __init__(self, cloud: str, name: str, known: tuple[str, ...]):
        super().__init__(f"no fabric floor for {cloud} machine type {name!r} (known: {', '.join(known)})")


def _floor(name: str, raw: Mapping[str, Any]) -> FabricFloor:
    published = raw.get("published")
    return FabricFloor(
        machine_type=name,
        line_rate_gbps=float(raw["lineRateGBps"]),
        min_bus_bandwidth_gbps=float(raw["minBusBandwidthGBps"]),
        published=MappingProxyType(dict(published)) if published else None,
    )


def _plugin(raw: Mapping[str, Any]) -> GcpNetPlugin:
    bindings = raw.get("cpuBindings")
    return GcpNetPlugin(
        networking=raw["networking"],
        net_name=raw["netName"],
        lib_dir=raw["libDir"],
        plugin_file=raw["pluginFile"],
        env=MappingProxyType(dict(raw["env"])),
        rxdm_socket_dir=raw.get("rxdmSocketDir"),
        env_profile=raw.get("envProfile"),
        llcm_device_dir=raw.get("llcmDeviceDir"),
        cpu_bindings=(tuple(bindings["tx"]), tuple(bindings["rx"])) if bindings else None,
        source=raw["source"],
    )


@functools.cache
def _table() -> _Table:
    raw = json.loads((files("infra.catalog") / "data" / "fabric.json").read_text(encoding="utf-8"))
    floors = {(cloud, name): _floor(name, row) for cloud in ("aws", "gcp") for name, row in raw[cloud].items()}
    return _Table(
        as_of=raw["asOf"],
        measure=raw["measure"],
        floor_basis=raw["floorBasis"],
        neuron_measure=raw["neuronMeasure"],
        message_bytes=int(raw["messageBytes"]),
        floors=MappingProxyType(floors),
        plugins=MappingProxyType({name: _plugin(row) for name, row in raw["gcp"].items()}),
    )


def fabric_floor(cloud: Cloud, machine_type: str) -> FabricFloor:
    """The floor for `machine_type` on `cloud`; UnknownFabric when the table has none."""
    table = _table()
    try:
        return table.floors[(cloud, machine_type)]
    except KeyError:
        known = tuple(sorted(name for c, name in table.floors if c == cloud))
        raise UnknownFabric(cloud, machine_type, known) from None


def known_fabric_types(cloud: Cloud) -> tuple[str, ...]:
    return tuple(sorted(name for c, name in _table().floors if c == cloud))


def gcp_net_plugin(machine_type: str) -> GcpNetPlugin:
    try:
        return _table().plugins[machine_type]
    except KeyError:
        raise UnknownFabric("gcp", machine_type, tuple(sorted(_table().plugins))) from None


def fabric_message_bytes() -> int:
    """Size of each all-reduce of the gate, bytes (the size the published figures were measured at)."""
    return _table().message_bytes


def fabric_table_source() -> tuple[str, str, str]:
    """(what is measured, how floors are set, as-of date)."""
    table = _table()
    return table.measure, table.floor_basis, table.as_of
