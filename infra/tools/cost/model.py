"""What a stack costs, as data: priced lines, the training run and its idle tail (no I/O, no pulumi)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from infra.serving.economics import ReplicaEconomics

# hourly: billed while the resource exists; per-run: a few invocations per training run (negligible per
# hour); usage: depends on traffic or stored data, unit prices only; unknown: no public/sourced price.
Basis = Literal["hourly", "per-run", "usage", "unknown"]
GROUPS = ("compute", "storage", "network", "control plane", "encryption", "guard", "logs", "registry data", "other")


@dataclass(frozen=True)
class Line:
    resource: str  # the resource's name
    type: str  # its type token
    component: str  # "<Noun> <name>" of the component that declares it ("" at the top level)
    group: str  # one of GROUPS
    basis: Basis
    what: str  # how the figure is made, e.g. "4 x p4d.24xlarge at $21.960/h"
    low: float = 0.0  # USD per hour at the lower bound (min nodes, cheapest allowed type)
    high: float = 0.0  # USD per hour at the upper bound (max nodes, dearest allowed type)
    per_run: float = 0.0  # USD per training run (per-invocation items), worst case by design
    unit_prices: tuple[str, ...] = ()  # usage prices, e.g. "$0.045 per GB processed"
    price_keys: tuple[str, ...] = ()  # service price entries used (their sources are listed)
    nodes: int = 0  # compute lines: nodes at the upper bound
    node_usd: float = 0.0  # compute lines: USD per node-hour at the upper bound


@dataclass(frozen=True)
class IdleTerm:
    what: str
    seconds: float
    usd: float
    why: str


@dataclass(frozen=True)
class IdleTail:
    """Spend after the job ends, as the lifecycle design allows it (infra/training/limits.py)."""

    terms: tuple[IdleTerm, ...]
    guard_path_usd: float  # compute if the nodes' own power-off fails and the guard stops them
    hard_cap_overrun_usd: float  # compute past expires-at before the hard cap has terminated it
    unattended_usd: float  # storage and network if nobody tears down (until expires-at; on GCP per hour)
    guard_path_what: str = "if a node's own power-off fails, the run guard stops it (worst case by design)"
    unattended_what: str = "if nobody tears down, storage and network bill until expires-at"

    @property
    def usd(self) -> float:
        return sum(t.usd for t in self.terms)


@dataclass(frozen=True)
class RunCost:
    hours: float
    hours_from: str  # "--hours" or "lifecycle.ttlHours"
    running_usd: float  # hourly total x hours
    per_run_usd: float  # per-invocation items (guard)
    idle: IdleTail

    @property
    def usd(self) -> float:
        return self.running_usd + self.per_run_usd + self.idle.usd


@dataclass(frozen=True)
class Source:
    what: str
    source: str
    as_of: str


@dataclass(frozen=True)
class ModelServerCost:
    model: str
    replicas: tuple[int, int]  # minReplicas, maxReplicas
    economics: ReplicaEconomics | None
    why_unknown: str = ""


@dataclass(frozen=True)
class StackCost:
    project: str
    stack: str
    kind: str
    region: str
    price_region: str
    lines: tuple[Line, ...]
    no_charge: tuple[tuple[str, int, str], ...]  # (resource type, count, why) of resources with no charge of their own
    sources: tuple[Source, ...]
    notes: tuple[str, ...] = ()
    run: RunCost | None = None
    hours_per_month: int = 730
    hours: float | None = field(default=None)  # --hours for non-training stacks
    # serving: each model server's cost per million output tokens at the predicted throughput
    model_servers: tuple[ModelServerCost, ...] = ()

    def of(self, basis: Basis) -> list[Line]:
        return [line for line in self.lines if line.basis == basis]

    @property
    def hourly_low(self) -> float:
        return sum(line.low for line in self.of("hourly"))

    @property
    def hourly_high(self) -> float:
        return sum(line.high for line in self.of("hourly"))

    @property
    def complete(self) -> bool:
        """False when some resource's price is unknown: the totals are then lower bounds."""
        return not self.of("unknown")

    def by_group(self) -> dict[str, tuple[float, float]]:
        """Hourly (low, high) per group, hourly and per-run lines alike (per-run items add 0 per hour)."""
        out: dict[str, tuple[float, float]] = {}
        for line in self.lines:
            if line.basis in ("hourly", "per-run"):
                low, high = out.get(line.group, (0.0, 0.0))
                out[line.group] = (low + line.low, high + line.high)
        return {g: out[g] for g in GROUPS if g in out}
