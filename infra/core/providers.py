"""The cloud providers' own config keys (`aws:region`, `gcp:project`, `gcp:region`): each cloud's stacks need
theirs, well formed, and no other cloud's. Returns (findings, region) so the meaning checks get the region."""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

from infra.core.errors import Problem
from infra.core.naming import is_region_name

GCP_PROJECT_PATTERN = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
GCP_REGION_PATTERN = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")


def aws_region_problem(region: object) -> str | None:
    """Why `region` is not an AWS region name of the pinned botocore's partitions, or None."""
    if not is_region_name(region):
        return f"must be an AWS region name such as us-east-1 (got {region!r})"
    if aws_regions() and region not in aws_regions():
        return (
            f"{region} is not an AWS region (the pinned botocore's partitions.json lists "
            f"{', '.join(r for r in aws_regions() if '-iso' not in r)}, and the ISO regions)"
        )
    return None


def aws_provider_findings(flat: dict[str, Any]) -> list[Problem]:
    """`aws:region` is optional in the file (the environment may give it), but when set it must be a region name."""
    region = flat.get("aws:region")
    problem = None if region is None else aws_region_problem(region)
    return [Problem("aws:region", problem)] if problem else []


@functools.cache
def _partitions() -> list[dict[str, Any]]:
    """botocore's own partitions.json at the pinned version (the table the SDK resolves endpoints with), read
    without importing botocore."""
    spec = importlib.util.find_spec("botocore")
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        return []
    data = json.loads((Path(locations[0]) / "data" / "partitions.json").read_text(encoding="utf-8"))
    partitions: list[dict[str, Any]] = data["partitions"]
    return partitions


@functools.cache
def aws_regions() -> tuple[str, ...]:
    """Every AWS region of every partition."""
    return tuple(sorted(r for p in _partitions() for r in p.get("regions", {}) if not r.endswith("-global")))


def aws_partition(region: str) -> dict[str, str]:
    """The partition holding `region` (aws, aws-us-gov, aws-cn, ...): its id and DNS suffix."""
    for partition in _partitions():
        if region in partition.get("regions", {}):
            return {"partition": partition["id"], "dnsSuffix": partition["outputs"]["dnsSuffix"]}
    return {"partition": "aws", "dnsSuffix": "amazonaws.com"}


def gcp_provider_findings(flat: dict[str, Any]) -> list[Problem]:
    """`gcp:project` and `gcp:region` are the pulumi-gcp provider's own keys; GCP stacks need both."""
    findings = []
    project, region = flat.get("gcp:project"), flat.get("gcp:region")
    if project is None:
        findings.append(Problem("gcp:project", "required with mlinfra:cloud gcp: the project id the stack deploys to"))
    elif not isinstance(project, str) or not GCP_PROJECT_PATTERN.fullmatch(project):
        findings.append(
            Problem("gcp:project", f"must be a GCP project id (6-30 lowercase letters, digits, '-'; got {project!r})")
        )
    if region is None:
        findings.append(Problem("gcp:region", "required with mlinfra:cloud gcp: a GCP region such as us-central1"))
    elif not isinstance(region, str) or not GCP_REGION_PATTERN.fullmatch(region):
        findings.append(Problem("gcp:region", f"must be a GCP region name such as us-central1 (got {region!r})"))
    if flat.get("aws:region") is not None:
        findings.append(
            Problem("aws:region", "a GCP stack has no AWS resources; remove aws:region or set mlinfra:cloud aws")
        )
    return findings
