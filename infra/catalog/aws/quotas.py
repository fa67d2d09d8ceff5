"""Service Quotas facts as data (data/aws_quotas.json): which quota an instance type's running vCPUs count against,
and the Region's network interface quota, each with how its code was confirmed.

Pure library: no pulumi imports, no I/O until the first lookup.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

_FAMILY_PREFIX = re.compile(r"([a-z]+)\d")


@dataclass(frozen=True)
class Quota:
    """One Service Quotas quota: what `aws service-quotas get-service-quota` takes, and its name."""

    service_code: str
    quota_code: str
    name: str
    confirmed_by: str

    def increase_command(self, desired: int, region: str) -> str:
        return (
            f"aws service-quotas request-service-quota-increase --service-code {self.service_code} "
            f"--quota-code {self.quota_code} --desired-value {desired} --region {region}"
        )


@dataclass(frozen=True)
class VcpuQuota(Quota):
    """An On-Demand vCPU quota and the instance families (prefixes) whose running instances count against it."""

    family: str = ""
    prefixes: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Table:
    as_of: str
    vcpu: tuple[VcpuQuota, ...]
    network_interfaces: Quota


@functools.cache
def _table() -> _Table:
    raw: dict[str, Any] = json.loads((files("infra.catalog") / "data" / "aws_quotas.json").read_text(encoding="utf-8"))
    eni = raw["networkInterfaces"]
    return _Table(
        as_of=raw["asOf"],
        vcpu=tuple(
            VcpuQuota(q["serviceCode"], q["quotaCode"], q["name"], q["confirmedBy"], q["family"], tuple(q["prefixes"]))
            for q in raw["vcpuQuotas"]
        ),
        network_interfaces=Quota(eni["serviceCode"], eni["quotaCode"], eni["name"], eni["confirmedBy"]),
    )


def family_prefix(instance_type: str) -> str | None:
    """The letters before the generation digit: "p" for p5en.48xlarge, "trn" for trn1n.32xlarge; None for a name
    without one (u-6tb1.metal, mac-m4.metal)."""
    found = _FAMILY_PREFIX.match(instance_type.strip().lower())
    return found.group(1) if found else None


def vcpu_quota(instance_type: str) -> VcpuQuota | None:
    """The On-Demand vCPU quota the type's running instances count against; None for a family the table lacks."""
    prefix = family_prefix(instance_type)
    return next((q for q in _table().vcpu if prefix in q.prefixes), None)


def vcpu_quotas() -> tuple[VcpuQuota, ...]:
    return _table().vcpu


def network_interface_quota() -> Quota:
    return _table().network_interfaces


def quota_table_as_of() -> str:
    return _table().as_of
