"""The cloud providers' own config keys (`aws:region`, `gcp:project`, `gcp:region`): each cloud's stacks need
theirs, well formed, and no other cloud's. Returns (findings, region) so the meaning checks get the region."""

from __future__ import annotations

import re
from typing import Any

from infra.core.errors import Problem
from infra.core.naming import is_region_name

GCP_PROJECT_PATTERN = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
GCP_REGION_PATTERN = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")


def aws_provider_findings(flat: dict[str, Any]) -> list[Problem]:
    """`aws:region` is optional in the file (the environment may give it), but when set it must be a region name."""
    region = flat.get("aws:region")
    if region is not None and not is_region_name(region):
        return [Problem("aws:region", f"must be an AWS region name such as us-east-1 (got {region!r})")]
    return []


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
