"""Google Cloud Managed Lustre sizing from the run's intents (the same `LustreIntent` as FSx), pure.

Tiers, minimum capacity and capacity step (the step below each tier's threshold, which a run never reaches):
Managed Lustre docs, "Increase the capacity of a Managed Lustre instance" / "Performance tiers"
(cloud.google.com/managed-lustre/docs/increase-capacity, read 2026-01): 1000 MB/s/TiB from 9,000 GiB in
9,000 GiB steps, 500 from 18,000 in 18,000, 250 from 36,000 in 36,000, 125 from 72,000 in 72,000.
Aggregate throughput = capacity TiB x the tier. Only the 125 MB/s/TiB tier's price is sourced, so sizing
cannot pick the cheapest: it picks the smallest capacity that meets every target (the lower tier on a tie)
and says so; cost prices the 125 tier and reports the others as unknown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.core.errors import Problem
from infra.training.lustre import LustreIntent

# tier (MB/s per TiB) -> (minimum GiB, step GiB)
TIERS: dict[int, tuple[int, int]] = {1000: (9000, 9000), 500: (18000, 18000), 250: (36000, 36000), 125: (72000, 72000)}
MAX_GIB = 954000  # the smallest tier maximum (1000 MB/s/TiB) in the page above; larger runs pin a tier
SOURCE = "cloud.google.com/managed-lustre/docs/increase-capacity (2026-01)"


@dataclass(frozen=True)
class ManagedLustrePlan:
    per_unit_storage_throughput: int  # MB/s per TiB
    capacity_gib: int
    aggregate_throughput_mbps: float
    reasons: tuple[str, ...]


def capacity_problem(tier: int, capacity_gib: int) -> str | None:
    low, step = TIERS[tier]
    if capacity_gib < low or capacity_gib % step:
        return (
            f"{capacity_gib} GiB is not a Managed Lustre capacity at {tier} MB/s/TiB; use at least {low} GiB "
            f"in steps of {step} GiB"
        )
    return None


def _throughput(tier: int, capacity_gib: int) -> float:
    return capacity_gib / 1024 * tier


def _capacity_for(tier: int, intent: LustreIntent) -> int:
    low, step = TIERS[tier]
    need_mbps = max(intent.write_mbps_needed, intent.read_mbps_needed)
    need_gib = max(intent.capacity_needed_gib, need_mbps / tier * 1024, low)
    return int(math.ceil(need_gib / step) * step)


def size_managed_lustre(
    intent: LustreIntent, tier: int | None = None, capacity_gib: int | None = None
) -> ManagedLustrePlan:
    """The smallest capacity (lower tier on a tie) that holds the data with headroom and meets the read and
    checkpoint-write targets; `tier` and `capacity_gib` pin values (checked by `pinned_problems` first)."""
    tiers = [tier] if tier else sorted(TIERS)
    options = sorted(((capacity_gib or _capacity_for(t, intent)), t) for t in tiers)
    capacity, chosen = options[0]
    need = intent.capacity_needed_gib
    reasons = (
        f"capacity: dataset {intent.dataset_gib:g} + 2 x checkpoint {intent.checkpoint_gib:g} GiB x "
        f"{intent.headroom:g} "
        f"headroom = {need:,.0f} GiB; Managed Lustre at {chosen} MB/s/TiB starts at {TIERS[chosen][0]:,} GiB in steps "
        f"of {TIERS[chosen][1]:,} ({SOURCE})",
        f"throughput: {capacity:,} GiB x {chosen} MB/s/TiB = {_throughput(chosen, capacity):,.0f} MB/s for reads of "
        f"{intent.read_mbps_needed:,.0f} MB/s and checkpoint writes of {intent.write_mbps_needed:,.0f} MB/s",
        "choice: "
        + (
            f"pinned to {chosen} MB/s/TiB"
            if tier
            else "Managed Lustre prices are sourced for one tier only (125 MB/s/TiB), so tiers are not compared "
            "on price: the smallest capacity that meets the targets "
            f"({', '.join(f'{t}: {c:,} GiB' for c, t in sorted(options, key=lambda o: o[1]))}), the lower "
            "tier on a tie"
        ),
    )
    return ManagedLustrePlan(chosen, capacity, _throughput(chosen, capacity), reasons)


def pinned_problems(path: str, tier: int | None, capacity_gib: int | None, intent: LustreIntent) -> list[Problem]:
    """Findings for pinned values: a capacity must be a step of the tier (its own or the sized one) and hold
    the data with headroom."""
    if capacity_gib is None:
        return []
    tiers = [tier] if tier else sorted(TIERS)
    if all(capacity_problem(t, capacity_gib) for t in tiers):
        return [
            Problem(
                path + "capacityGib",
                capacity_problem(tiers[0], capacity_gib) or ""
                if tier
                else f"{capacity_gib} GiB is not a Managed Lustre capacity of any tier; e.g. a multiple of 9000 GiB "
                "at 1000 MB/s/TiB",
            )
        ]
    if capacity_gib < intent.capacity_needed_gib:
        return [
            Problem(
                path + "capacityGib",
                f"{capacity_gib} GiB is below what the data needs with headroom "
                f"({intent.capacity_needed_gib:,.0f} GiB); raise it or remove it",
            )
        ]
    return []


def pinned_tier(tier: int | None, capacity_gib: int | None) -> int | None:
    """The tier a pinned capacity implies when no tier is pinned: the highest tier it is a step of."""
    if tier or capacity_gib is None:
        return tier
    return next((t for t in sorted(TIERS, reverse=True) if not capacity_problem(t, capacity_gib)), None)
