"""Typed, frozen records for EC2 instance facts (built from data/aws_instances.json)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

AcceleratorKind = Literal["gpu", "neuron"]


@dataclass(frozen=True)
class Accelerator:
    kind: AcceleratorKind
    manufacturer: str
    model: str  # "A100", "H100", "Trainium2", "Inferentia2", ...
    count: int
    memory_mib: int  # per device
    cores_per_device: int | None  # NeuronCores per Neuron device; None for GPUs


@dataclass(frozen=True)
class NetworkCard:
    index: int
    baseline_gbps: float
    peak_gbps: float
    max_interfaces: int
    interface_types: tuple[str, ...]  # subset of "interface", "efa", "efa-only"

    @property
    def efa_capable(self) -> bool:
        return "efa" in self.interface_types or "efa-only" in self.interface_types


@dataclass(frozen=True)
class InstanceType:
    name: str
    vcpus: int
    memory_mib: int
    accelerators: tuple[Accelerator, ...]
    network_cards: tuple[NetworkCard, ...]
    max_network_cards: int
    efa_supported: bool
    max_efa_interfaces: int
    ena_support: str
    placement_strategies: tuple[str, ...]
    usage_classes: tuple[str, ...]
    offerings: Mapping[str, tuple[str, ...]] = field(hash=False)  # region -> AZ names, sorted

    @property
    def accelerator_count(self) -> int:
        return sum(a.count for a in self.accelerators)

    @property
    def accelerator_kind(self) -> AcceleratorKind | None:
        # The generator guarantees one kind per type.
        return self.accelerators[0].kind if self.accelerators else None

    @property
    def accelerator_model(self) -> str | None:
        return self.accelerators[0].model if self.accelerators else None

    @property
    def total_bandwidth_gbps(self) -> float:
        """Sum of the cards' *baseline* bandwidth: what the node sustains. Peak figures on small
        types are burst credits, not a rate to size against; on EFA types the two are equal."""
        return sum(c.baseline_gbps for c in self.network_cards)

    @property
    def efa_cards(self) -> tuple[NetworkCard, ...]:
        return tuple(c for c in self.network_cards if c.efa_capable)

    @property
    def regions(self) -> tuple[str, ...]:
        return tuple(self.offerings)

    def azs(self, region: str) -> tuple[str, ...]:
        """AZs of `region` that offer this type; empty if none (or the region is unknown)."""
        return self.offerings.get(region, ())

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> InstanceType:
        return cls(
            name=raw["name"],
            vcpus=raw["vcpus"],
            memory_mib=raw["memoryMiB"],
            accelerators=tuple(
                Accelerator(
                    kind=a["kind"],
                    manufacturer=a["manufacturer"],
                    model=a["model"],
                    count=a["count"],
                    memory_mib=a["memoryMiB"],
                    cores_per_device=a["coresPerDevice"],
                )
                for a in raw["accelerators"]
            ),
            network_cards=tuple(
                NetworkCard(
                    index=c["index"],
                    baseline_gbps=c["baselineGbps"],
                    peak_gbps=c["peakGbps"],
                    max_interfaces=c["maxInterfaces"],
                    interface_types=tuple(c["interfaceTypes"]),
                )
                for c in raw["networkCards"]
            ),
            max_network_cards=raw["maximumNetworkCards"],
            efa_supported=raw["efaSupported"],
            max_efa_interfaces=raw["maxEfaInterfaces"],
            ena_support=raw["enaSupport"],
            placement_strategies=tuple(raw["placementStrategies"]),
            usage_classes=tuple(raw["usageClasses"]),
            offerings=MappingProxyType({region: tuple(azs) for region, azs in sorted(raw["offerings"].items())}),
        )
