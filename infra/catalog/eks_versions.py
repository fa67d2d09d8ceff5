"""The Kubernetes minors EKS has released, with their support dates (data/eks_versions.json, with its source and
as-of date): a cluster version EKS never released is refused as such, before the narrower check that
mlinfra pins its charts for it."""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any


@cache
def _data() -> dict[str, Any]:
    return dict(json.loads((files("infra.catalog") / "data" / "eks_versions.json").read_text(encoding="utf-8")))


def eks_versions() -> tuple[str, ...]:
    """Released minors, oldest first."""
    return tuple(sorted(_data()["versions"], key=lambda v: tuple(int(p) for p in v.split("."))))


def support_dates(version: str) -> dict[str, str]:
    """released, standardSupportEnds and extendedSupportEnds of a released minor (the oldest lacks the ends)."""
    return dict(_data()["versions"][version])


def versions_source() -> tuple[str, str]:
    return str(_data()["source"]), str(_data()["asOf"])


def version_problem(version: str) -> str | None:
    """Why `version` is not a Kubernetes minor EKS has released, or None."""
    if version in eks_versions():
        return None
    known = eks_versions()
    return (
        f"{version} is not a Kubernetes version EKS has released ({known[0]} to {known[-1]} as of "
        f"{versions_source()[1]})"
    )
