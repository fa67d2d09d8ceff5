"""Which Availability Zones the serving cluster spans, and which of them each node pool's groups use (pure).

Decided on zone IDs (use1-az2), which name the same physical zone in every account; the account's own names
come with them from DescribeAvailabilityZones. A zone is a candidate when the account has it and EKS places
cluster interfaces there (catalog: eks_zones.json). A pool may use a zone that offers every one of its
instance types (catalog: aws_zones.json, DescribeInstanceTypeOfferings by zone ID), so every size of a pool
can scale in each of the pool's zones. Of the candidates, the cluster takes the `count` zones that give the
pools the most zones, then the lowest zone IDs: the same zones in every account. `cluster.availabilityZoneIds`
pins them instead (a deployed cluster cannot change zones), checked the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from types import MappingProxyType

from infra.catalog.aws.zones import eks_unsupported_zone_ids, region_zone_ids, zone_ids_offering
from infra.core.errors import InputError, Problem

P = "mlinfra:serving."
SYSTEM_POOL = "system"  # the add-ons' untainted node groups (node_pools.system_plans)


@dataclass(frozen=True)
class Zone:
    name: str  # what this account calls it (us-east-1c)
    zone_id: str  # what it is (use1-az2)


@dataclass(frozen=True)
class ZonePlan:
    zones: tuple[Zone, ...]  # the cluster's zones, one subnet slot each, in this order
    slots: Mapping[str, tuple[int, ...]]  # pool -> indexes into zones of the subnets its node groups use

    def pool_zone_ids(self, pool: str) -> tuple[str, ...]:
        return tuple(self.zones[i].zone_id for i in self.slots[pool])


def pool_zone_ids(region: str, types: Sequence[str]) -> tuple[str, ...]:
    """Zone IDs of the region that EKS supports and that offer every one of the types, sorted."""
    if not types:
        return ()
    common = set.intersection(*(set(zone_ids_offering(t, region)) for t in types))
    return tuple(sorted(common - set(eks_unsupported_zone_ids(region)), key=zone_id_order))


def where(pool: str) -> str:
    """The key path a finding about a pool's zones names."""
    return "aws:region" if pool == SYSTEM_POOL else f"{P}nodePools.{pool}.instanceTypes"


def pool_zone_problem(region: str, pool: str, types: Sequence[str]) -> Problem | None:
    """A pool whose types share no zone that EKS supports: its sizes could never all scale in one place."""
    if pool_zone_ids(region, types):
        return None
    unsupported = set(eks_unsupported_zone_ids(region))
    offered = "; ".join(
        f"{t} in {', '.join(z for z in zone_ids_offering(t, region) if z not in unsupported) or 'none'}" for t in types
    )
    subject = f"the system node pool's types ({', '.join(types)})" if pool == SYSTEM_POOL else f"the {pool} pool"
    return Problem(
        where(pool),
        f"no availability zone of {region} that EKS supports offers every type of {subject}: {offered}; "
        "list sizes that share a zone",
    )


PINNED = f"{P}cluster.availabilityZoneIds"


def pinned_zone_problems(region: str, pinned: Sequence[str]) -> list[Problem]:
    """Pinned zone IDs that are not the region's (as far as the catalog knows its IDs) or that EKS refuses."""
    known = set(region_zone_ids(region))
    problems = []
    foreign = [z for z in pinned if known and z not in known]
    if foreign:
        problems.append(
            Problem(
                PINNED,
                f"{', '.join(foreign)}: not zones of {region}, whose zone IDs are "
                f"{', '.join(sorted(known, key=zone_id_order))}",
            )
        )
    refused = [z for z in pinned if z in eks_unsupported_zone_ids(region)]
    if refused:
        problems.append(
            Problem(PINNED, f"EKS places no cluster in {', '.join(refused)} (UnsupportedAvailabilityZoneException)")
        )
    return problems


def choose_zones(
    region: str,
    available: Sequence[Zone],
    pools: Mapping[str, Sequence[str]],
    count: int,
    pinned: Sequence[str] = (),
) -> ZonePlan:
    """The cluster's `count` zones, or the `pinned` zone IDs in their order, and each pool's share of them;
    InputError naming the pool when none fits."""
    unsupported = set(eks_unsupported_zone_ids(region))
    by_id = {z.zone_id: z for z in available}
    if pinned:
        absent = [z for z in pinned if z not in by_id]
        has = ", ".join(sorted(by_id, key=zone_id_order)) or "none"
        problems = pinned_zone_problems(region, pinned) or (
            [Problem(PINNED, f"{', '.join(absent)}: not available to this account in {region}, which has {has}")]
            if absent
            else []
        )
        if problems:
            raise InputError(problems)
        count = len(pinned)
    candidates = (
        [by_id[z] for z in pinned]
        if pinned
        else sorted((z for z in by_id.values() if z.zone_id not in unsupported), key=lambda z: zone_id_order(z.zone_id))
    )
    ids = {z.zone_id for z in candidates}
    eligible = {pool: set(pool_zone_ids(region, types)) & ids for pool, types in pools.items()}
    problems = [
        pool_zone_problem(region, pool, types)
        or (
            pinned_pool_problem(region, pool, types, pinned)
            if pinned
            else _not_available(region, pool, types, candidates)
        )
        for pool, types in pools.items()
        if not eligible[pool]
    ]
    if problems:
        raise InputError(problems)
    if len(candidates) < count:
        raise InputError(
            Problem(
                f"{P}cluster.availabilityZones",
                f"{count} zones asked for, but this account has {len(candidates)} zones in {region} that EKS "
                f"supports ({', '.join(z.zone_id for z in candidates) or 'none'}); EKS needs two",
            )
        )

    def score(combo: tuple[Zone, ...]) -> tuple[int, int]:
        chosen = {z.zone_id for z in combo}
        return sum(1 for e in eligible.values() if e & chosen), sum(len(e & chosen) for e in eligible.values())

    # combinations() yields in candidate order and max() keeps the first best: the lowest zone IDs win ties.
    # Pinned zones are the one combination, in their own order: each subnet slot keeps its zone.
    best = tuple(candidates) if pinned else max(combinations(candidates, count), key=score)
    chosen = {z.zone_id for z in best}
    left_out = [pool for pool, e in eligible.items() if not e & chosen]
    if left_out:
        raise InputError(
            [
                Problem(
                    where(pool),
                    f"offered only in {', '.join(sorted(eligible[pool], key=zone_id_order))}, none of which fits in "
                    f"the cluster's {count} zones with the other pools'; raise cluster.availabilityZones or list "
                    "other sizes",
                )
                for pool in left_out
            ]
        )
    slots = {pool: tuple(i for i, z in enumerate(best) if z.zone_id in eligible[pool]) for pool in pools}
    return ZonePlan(zones=best, slots=MappingProxyType(slots))


def zone_id_order(zone_id: str) -> tuple[str, int]:
    """Zone IDs in numeric order (use1-az2 before use1-az10)."""
    prefix, _, number = zone_id.rpartition("-az")
    return (prefix, int(number)) if number.isdigit() else (zone_id, 0)


def pinned_pool_problem(region: str, pool: str, types: Sequence[str], pinned: Sequence[str]) -> Problem:
    """The pinned zones leave a pool out."""
    return Problem(
        where(pool),
        f"none of cluster.availabilityZoneIds ({', '.join(pinned)}) offers every type of the pool; zones of "
        f"{region} that do: {', '.join(pool_zone_ids(region, types))}",
    )


def _not_available(region: str, pool: str, types: Sequence[str], candidates: Sequence[Zone]) -> Problem:
    """The catalog has a zone for the pool, but this account does not (zone not enabled or not available)."""
    return Problem(
        where(pool),
        f"the zones of {region} that offer every type of the pool ({', '.join(pool_zone_ids(region, types))}) are "
        f"not available to this account, which has {', '.join(z.zone_id for z in candidates) or 'none'}; "
        "list sizes offered there",
    )
