"""Availability Zone facts by zone ID (generated data/aws_zones.json, curated data/eks_zones.json).

Zone names (us-east-1a) are shuffled per account; zone IDs (use1-az1) name the same physical zone everywhere,
so every decision is taken on IDs and names are only read from the account's own answer.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from importlib.resources import files
from types import MappingProxyType
from typing import Any


def _load(filename: str) -> dict[str, Any]:
    return json.loads((files("infra.catalog") / "data" / filename).read_text(encoding="utf-8"))


@functools.cache
def _zones() -> dict[str, Any]:
    return _load("aws_zones.json")


@functools.cache
def _eks() -> dict[str, Any]:
    return _load("eks_zones.json")


def zone_ids_offering(instance_type: str, region: str) -> tuple[str, ...]:
    """Zone IDs of `region` that offer the type, sorted; empty where none does or the region is unknown."""
    return tuple(_zones()["zoneIdOfferings"].get(region, {}).get(instance_type, ()))


def region_zone_ids(region: str) -> tuple[str, ...]:
    """Every zone ID of the region that offers one of the data's types, sorted; empty for a region it lacks."""
    return tuple(sorted({z for ids in _zones()["zoneIdOfferings"].get(region, {}).values() for z in ids}))


def general_purpose_types() -> tuple[str, ...]:
    """The non-accelerator types whose zone offerings the data holds."""
    return tuple(_zones()["generalPurposeTypes"])


def eks_unsupported_zone_ids(region: str) -> tuple[str, ...]:
    """Zone IDs where EKS places no cluster network interfaces (UnsupportedAvailabilityZoneException)."""
    return tuple(_eks()["unsupportedZoneIds"].get(region, ()))


def offline_zones(region: str) -> Mapping[str, str]:
    """Zone name -> zone ID of one fixed account (moto's), in name order: what the offline preview answers."""
    return MappingProxyType(dict(_zones()["offlineZones"].get(region, [])))
