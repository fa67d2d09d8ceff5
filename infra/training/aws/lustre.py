"""FSx for Lustre: allowed steps, validation messages and cost-optimal sizing (pure, no pulumi).

Facts (SSD storage only; HDD and Intelligent-Tiering are out of scope for training scratch space):

- Storage capacity: SCRATCH_2, PERSISTENT_1 and PERSISTENT_2 take 1200 GiB, 2400 GiB and increments of
  2400 GiB; SCRATCH_1 takes 1200, 2400 and increments of 3600 GiB. FSx API CreateFileSystem
  StorageCapacity: https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateFileSystem.html
  (same text in the SDK reference, .../fsx.model/-create-file-system-request/storage-capacity.html)
- Per-unit throughput (MB/s/TiB), required for persistent types and not settable for scratch:
  PERSISTENT_1 SSD 50/100/200, PERSISTENT_2 SSD 125/250/500/1000.
  https://docs.aws.amazon.com/fsx/latest/LustreGuide/managing-throughput-capacity.html and the SDK
  reference for CreateFileSystemLustreConfiguration.perUnitStorageThroughput
- SCRATCH_2 (docs/reference.md, "FSx for Lustre"): 200 MB/s/TiB network baseline (1300 burst), disk throughput
  200 MB/s/TiB for reads but only 100 MB/s/TiB for writes; PERSISTENT-x disk baseline = x. Writes and
  uncached reads run at the lower of network and disk throughput, so sizing uses the disk figures.
  https://docs.aws.amazon.com/fsx/latest/LustreGuide/ssd-storage.html ("File system performance for
  SSD storage options") and https://docs.aws.amazon.com/fsx/latest/LustreGuide/performance.html
- Data repository associations (DRAs, needed here: datasets imported, checkpoints exported) "are
  supported on all FSx for Lustre 2.12 and 2.15 file systems, excluding scratch_1 deployment type".
  https://docs.aws.amazon.com/goto/WebAPI/fsx-2018-03-01/CreateDataRepositoryAssociation
  (The pulumi-aws/Terraform docstring still says "only PERSISTENT_2"; that predates AWS's extension.)
  So the file system must be created with Lustre 2.12 or later: `LUSTRE_VERSION`.
- Prices: us-east-1 list, USD per GB-month, from docs/reference.md ("FSx for Lustre"). No sourced price for
  PERSISTENT_1 (AWS calls it previous generation), so sizing never picks it and refuses it when pinned.

Units: capacities in GiB, throughput in MB/s (1 MB = 10^6 bytes, the unit of AWS's MB/s/TiB figures),
1 GiB = 1073.741824 MB, 1 TiB = 1024 GiB. Read targets are in Gbit/s, as the key is named (1 Gbit/s = 125 MB/s).
Cost is billed on provisioned capacity: GiB x price per GB-month; one month = 730 hours.

Sizing needs no cap on capacity: for one (deployment type, per-unit throughput) the cost only grows with
capacity, so the smallest allowed step that meets every target is that option's cheapest, and the answer
is the cheapest of a handful of options (one per priced tier).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal, get_args

from infra.catalog.services import hours_per_month, lustre_price_key, service_price, service_price_region
from infra.training.lustre import LustreIntent, LustreSizingError

DeploymentType = Literal["SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"]
DEPLOYMENT_TYPES: tuple[str, ...] = get_args(DeploymentType)

HOURS_PER_MONTH = hours_per_month()
GIB_PER_TIB = 1024
# Lustre version to create S3-linked file systems with (DRAs need 2.12 or later).
LUSTRE_VERSION = "2.15"

_SOURCE_CAPACITY = "FSx API CreateFileSystem StorageCapacity (SSD)"
_SOURCE_THROUGHPUT = "FSx for Lustre user guide, managing-throughput-capacity and ssd-storage"
_SOURCE_DRA = "FSx API CreateDataRepositoryAssociation: all 2.12/2.15 file systems except SCRATCH_1"


@dataclass(frozen=True)
class CapacityRule:
    """Allowed storage capacities: the listed single values, or any positive multiple of `increment`."""

    singles: tuple[int, ...]
    increment: int
    source: str = _SOURCE_CAPACITY

    def allows(self, gib: int) -> bool:
        return gib in self.singles or (gib > 0 and gib % self.increment == 0)

    def at_least(self, gib: float) -> int:
        """The smallest allowed capacity >= gib."""
        for single in sorted(self.singles):
            if single >= gib:
                return single
        return max(1, math.ceil(gib / self.increment)) * self.increment

    def below(self, gib: int) -> int | None:
        """The largest allowed capacity < gib, or None."""
        under = [s for s in self.singles if s < gib]
        multiple = (gib - 1) // self.increment * self.increment
        if multiple > 0:
            under.append(multiple)
        return max(under) if under else None

    def describe(self) -> str:
        parts = [f"{s} GiB" for s in self.singles if s % self.increment]
        parts.append(f"a multiple of {self.increment} GiB")
        return ", ".join(parts[:-1]) + " or " + parts[-1] if len(parts) > 1 else parts[0]


@dataclass(frozen=True)
class Tier:
    """One (deployment type, per-unit throughput) choice with its disk throughput and price."""

    deployment_type: str
    per_unit: int | None  # what CreateFileSystem takes; None for scratch (fixed baseline)
    read_mbps_per_tib: int
    write_mbps_per_tib: int
    usd_per_gb_month: float | None
    price_source: str | None = field(default=None, compare=False)
    replicated: bool = True  # persistent types replicate within the AZ; scratch types do not

    @property
    def label(self) -> str:
        return self.deployment_type + (f" {self.per_unit} MB/s/TiB" if self.per_unit else "")


def _priced(deployment_type: str, per_unit: int | None, read: int, write: int, replicated: bool = True) -> Tier:
    """A tier priced from the service price table (infra/catalog/data/aws_service_prices.json)."""
    price = service_price(lustre_price_key(deployment_type, per_unit))
    return Tier(
        deployment_type,
        per_unit,
        read,
        write,
        price.usd,
        f"{service_price_region()} list price: {price.source}, as of {price.as_of}" if price.usd is not None else None,
        replicated=replicated,
    )


CAPACITY_RULES: dict[str, CapacityRule] = {
    "SCRATCH_1": CapacityRule((1200, 2400), 3600),
    "SCRATCH_2": CapacityRule((1200,), 2400),
    "PERSISTENT_1": CapacityRule((1200,), 2400),
    "PERSISTENT_2": CapacityRule((1200,), 2400),
}
PER_UNIT_THROUGHPUT: dict[str, tuple[int, ...]] = {
    "PERSISTENT_1": (50, 100, 200),
    "PERSISTENT_2": (125, 250, 500, 1000),
}
SCRATCH_BASELINE_MBPS_PER_TIB: dict[str, int] = {"SCRATCH_1": 200, "SCRATCH_2": 200}
DRA_DEPLOYMENT_TYPES: frozenset[str] = frozenset({"SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"})

# The tiers that can be sized: every DRA-capable (type, per-unit) pair. SCRATCH_1 is absent on purpose.
TIERS: tuple[Tier, ...] = (
    _priced("SCRATCH_2", None, 200, 100, replicated=False),
    _priced("PERSISTENT_1", 50, 50, 50),
    _priced("PERSISTENT_1", 100, 100, 100),
    _priced("PERSISTENT_1", 200, 200, 200),
    _priced("PERSISTENT_2", 125, 125, 125),
    _priced("PERSISTENT_2", 250, 250, 250),
    _priced("PERSISTENT_2", 500, 500, 500),
    _priced("PERSISTENT_2", 1000, 1000, 1000),
)


def capacity_problem(deployment_type: str, capacity_gib: int) -> str | None:
    """Why `capacity_gib` is not a storage capacity of `deployment_type`, or None if it is."""
    problem = _type_problem(deployment_type)
    if problem:
        return problem
    rule = CAPACITY_RULES[deployment_type]
    if isinstance(capacity_gib, int) and not isinstance(capacity_gib, bool) and rule.allows(capacity_gib):
        return None
    shown = capacity_gib if isinstance(capacity_gib, int | float) else repr(capacity_gib)
    nearest = ""
    if isinstance(capacity_gib, int | float) and not isinstance(capacity_gib, bool):
        around = [v for v in (rule.below(math.ceil(capacity_gib)), rule.at_least(capacity_gib)) if v]
        nearest = f" (nearest: {', '.join(str(v) for v in dict.fromkeys(around))})"
    return f"{shown} GiB is not a {deployment_type} storage capacity; allowed: {rule.describe()}{nearest}"


def throughput_problem(deployment_type: str, per_unit: int | None) -> str | None:
    """Why `per_unit` (MB/s/TiB) is not a per-unit storage throughput of `deployment_type`, or None."""
    problem = _type_problem(deployment_type)
    if problem:
        return problem
    allowed = PER_UNIT_THROUGHPUT.get(deployment_type)
    if allowed is None:
        if per_unit is None:
            return None
        baseline = SCRATCH_BASELINE_MBPS_PER_TIB[deployment_type]
        return (
            f"{deployment_type} has a fixed baseline of {baseline} MB/s/TiB; leave the per-unit "
            f"throughput unset (it applies to {', '.join(PER_UNIT_THROUGHPUT)} only)"
        )
    choices = ", ".join(str(v) for v in allowed)
    if per_unit is None:
        return f"{deployment_type} needs a per-unit throughput; allowed: {choices} MB/s/TiB"
    if isinstance(per_unit, bool) or per_unit not in allowed:
        return f"{per_unit} is not a {deployment_type} throughput; allowed: {choices} MB/s/TiB"
    return None


@dataclass(frozen=True)
class FsxIntent(LustreIntent):
    """The run's intents, optionally pinning an FSx deployment type (None lets sizing choose)."""

    deployment_type: str | None = None

    def problems(self) -> list[str]:
        problems = super().problems()
        if self.deployment_type is not None:
            problem = _type_problem(self.deployment_type) or _tier_problem(self.deployment_type)
            if problem:
                problems.append(f"deployment_type: {problem}")
        return problems


@dataclass(frozen=True)
class LustrePlan:
    deployment_type: str
    storage_capacity_gib: int
    per_unit_storage_throughput: int | None  # None for scratch: leave the provider input unset
    aggregate_throughput_mbps: float  # capacity TiB x per-unit (scratch: x its 200 baseline)
    hourly_cost_usd: float
    monthly_cost_usd: float
    reasons: tuple[str, ...]
    write_throughput_mbps: float = 0.0  # capacity TiB x disk write throughput (scratch: 100/TiB)
    file_system_type_version: str = LUSTRE_VERSION


def sizing_tiers(deployment_type: str | None = None) -> tuple[Tier, ...]:
    """The tiers sizing may choose from: DRA-capable and priced, optionally one deployment type."""
    return tuple(
        t
        for t in TIERS
        if t.usd_per_gb_month is not None
        and t.deployment_type in DRA_DEPLOYMENT_TYPES
        and deployment_type in (None, t.deployment_type)
    )


def capacity_for(tier: Tier, intent: FsxIntent) -> int:
    """The smallest allowed capacity of `tier` that holds the data and meets both throughput targets."""
    for_throughput = (
        max(
            intent.read_mbps_needed / tier.read_mbps_per_tib,
            intent.write_mbps_needed / tier.write_mbps_per_tib,
        )
        * GIB_PER_TIB
    )
    needed = max(intent.capacity_needed_gib, for_throughput, 1)
    return CAPACITY_RULES[tier.deployment_type].at_least(_trim(needed))


def monthly_cost(tier: Tier, capacity_gib: int) -> float:
    assert tier.usd_per_gb_month is not None, tier
    return capacity_gib * tier.usd_per_gb_month


def meets_targets(tier: Tier, capacity_gib: int, intent: FsxIntent) -> bool:
    tib = capacity_gib / GIB_PER_TIB
    return (
        capacity_gib >= _trim(intent.capacity_needed_gib)
        and _trim(tib * tier.read_mbps_per_tib) >= _trim(intent.read_mbps_needed)
        and _trim(tib * tier.write_mbps_per_tib) >= _trim(intent.write_mbps_needed)
    )


def size_lustre(intent: FsxIntent) -> LustrePlan:
    """The cheapest allowed (deployment type, capacity, per-unit throughput) that meets the intent;
    ties go to the smaller capacity, then to the order of `TIERS`."""
    tiers = sizing_tiers(intent.deployment_type)
    cost, capacity, tier = _cheapest(tiers, intent, capacity_gib=None)
    assert meets_targets(tier, capacity, intent), (tier, capacity, intent)
    return _plan(intent, tier, capacity, cost, _reasons(intent, tier, capacity, cost, len(tiers)))


def size_lustre_pinned(intent: FsxIntent, capacity_gib: int | None = None, per_unit: int | None = None) -> LustrePlan:
    """`size_lustre` with the user's pinned capacity and/or per-unit throughput in place of sized ones.

    Pins are judged against PERSISTENT_2 unless the intent pins a deployment type (the config checks
    make the same assumption); a pin that misses a target is kept, and the reasons say what it misses.
    """
    if capacity_gib is None and per_unit is None:
        return size_lustre(intent)
    deployment_type = intent.deployment_type or "PERSISTENT_2"
    intent = replace(intent, deployment_type=deployment_type)
    problem = (capacity_problem(deployment_type, capacity_gib) if capacity_gib is not None else None) or (
        throughput_problem(deployment_type, per_unit) if per_unit is not None else None
    )
    if problem:
        raise LustreSizingError(problem)
    tiers = tuple(t for t in sizing_tiers(intent.deployment_type) if per_unit is None or t.per_unit == per_unit)
    cost, capacity, tier = _cheapest(tiers, intent, capacity_gib)
    reasons = list(_reasons(intent, tier, capacity, cost, len(tiers)))
    if per_unit is not None:
        reasons[0] = f"deployment {tier.label}: pinned by perUnitStorageThroughput"
    if capacity_gib is not None:
        reasons[1] = (
            f"capacity {capacity} GiB: pinned by storageCapacityGib "
            f"(the data needs {_n(_trim(intent.capacity_needed_gib))} GiB with headroom)"
        )
    if not meets_targets(tier, capacity, intent):
        reasons.append("the pinned values miss a target above; drop the pins to size for every target")
    return _plan(intent, tier, capacity, cost, tuple(reasons))


def _cheapest(tiers: tuple[Tier, ...], intent: FsxIntent, capacity_gib: int | None) -> tuple[float, int, Tier]:
    choices = []
    for order, tier in enumerate(tiers):
        capacity = capacity_gib or capacity_for(tier, intent)
        choices.append((round(monthly_cost(tier, capacity), 6), capacity, order, tier))
    cost, capacity, _, tier = min(choices, key=lambda choice: choice[:3])
    return cost, capacity, tier


def _plan(intent: FsxIntent, tier: Tier, capacity: int, cost: float, reasons: tuple[str, ...]) -> LustrePlan:
    tib = capacity / GIB_PER_TIB
    baseline = tier.per_unit or SCRATCH_BASELINE_MBPS_PER_TIB[tier.deployment_type]
    return LustrePlan(
        deployment_type=tier.deployment_type,
        storage_capacity_gib=capacity,
        per_unit_storage_throughput=tier.per_unit,
        aggregate_throughput_mbps=tib * baseline,
        hourly_cost_usd=cost / HOURS_PER_MONTH,
        monthly_cost_usd=cost,
        reasons=reasons,
        write_throughput_mbps=tib * tier.write_mbps_per_tib,
    )


def _reasons(intent: FsxIntent, tier: Tier, capacity: int, cost: float, options: int) -> tuple[str, ...]:
    rule = CAPACITY_RULES[tier.deployment_type]
    tib = capacity / GIB_PER_TIB
    if intent.deployment_type:
        why_type = (
            f"deployment {tier.label}: the cheapest that meets every target among the {options} priced "
            f"{tier.deployment_type} tiers (pinned by deployment_type)"
        )
    else:
        why_type = (
            f"deployment {tier.label}: the cheapest that meets every target among {options} priced tiers "
            "with data repository associations (SCRATCH_1 has none; PERSISTENT_1 has no sourced price)"
        )
    need = _trim(intent.capacity_needed_gib)
    data = (
        f"dataset {_n(intent.dataset_gib)} + 2 x checkpoint {_n(intent.checkpoint_gib)} GiB x "
        f"{_n(intent.headroom)} headroom = {_n(need)}"
    )
    if capacity == rule.at_least(need):
        rounded = "" if capacity == need else f", rounded up to an allowed step ({rule.describe()})"
        why_capacity = f"capacity {capacity} GiB: {data}{rounded}"
    else:
        why_capacity = f"capacity {capacity} GiB: set by throughput; the data alone needs {data} GiB"
    if tier.per_unit:
        per_unit = f"throughput {tier.per_unit} MB/s/TiB"
    else:
        per_unit = (
            f"throughput {tier.read_mbps_per_tib} MB/s/TiB ({tier.deployment_type} fixed baseline; "
            f"disk writes {tier.write_mbps_per_tib} MB/s/TiB)"
        )
    demands = [
        f"checkpoint {_n(intent.checkpoint_gib)} GiB in {_n(intent.checkpoint_write_seconds)} s needs "
        f"{math.ceil(_trim(intent.write_mbps_needed))} MB/s of writes"
    ]
    if intent.read_mbps_needed:
        read = math.ceil(_trim(intent.read_mbps_needed))
        demands.append(f"reading {_n(intent.read_throughput_gbps)} Gbit/s needs {read} MB/s")
    gives_read = math.floor(_trim(tib * tier.read_mbps_per_tib))
    gives_write = math.floor(_trim(tib * tier.write_mbps_per_tib))
    why_throughput = (
        f"{per_unit}: {'; '.join(demands)}; {capacity} GiB gives {gives_read} MB/s read, {gives_write} MB/s write"
    )
    why_cost = (
        f"cost ${cost / HOURS_PER_MONTH:.2f}/hour (${cost:.2f}/month): {capacity} GiB x "
        f"${tier.usd_per_gb_month:.3f} per GB-month, {tier.price_source}"
    )
    reasons = [why_type, why_capacity, why_throughput, why_cost]
    if not tier.replicated:
        reasons.append(
            f"{tier.deployment_type} is not replicated: a file server failure loses what is not yet "
            "exported to S3; set deployment_type PERSISTENT_2 for replicated storage"
        )
    return tuple(reasons)


def _type_problem(deployment_type: str) -> str | None:
    if deployment_type in DEPLOYMENT_TYPES:
        return None
    allowed = ", ".join(DEPLOYMENT_TYPES)
    return f"{deployment_type!r} is not an FSx for Lustre deployment type; allowed: {allowed}"


def _tier_problem(deployment_type: str) -> str | None:
    if deployment_type not in DRA_DEPLOYMENT_TYPES:
        allowed = ", ".join(sorted(DRA_DEPLOYMENT_TYPES))
        return f"{deployment_type} does not support data repository associations; allowed: {allowed}"
    if not sizing_tiers(deployment_type):
        allowed = ", ".join(sorted({t.deployment_type for t in sizing_tiers()}))
        return f"{deployment_type} has no sourced price to size against; allowed: {allowed}"
    return None


def _trim(x: float) -> float:
    """Drop float noise (4800.000000001 -> 4800.0) before rounding up to a step."""
    return round(x, 6)


def _n(x: float) -> str:
    return f"{x:g}" if float(x).is_integer() else f"{x:.2f}".rstrip("0")
