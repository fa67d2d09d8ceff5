"""What a training run needs of the Region's Service Quotas, and the verdict once the quota and its use are read
(pure: the figures come in, problems come out; `infra.ops.lifecycle.quota` reads them from AWS).

- vCPUs: nodeCount x the type's vCPUs (catalog) against the On-Demand vCPU quota of the type's family, plus the
  vCPUs already running or pending of that family in the Region (the quota is on the Region's total);
- network interfaces: nodeCount x the interfaces of the node's launch template (the EFA layout: one ENA interface
  and every EFA-only one, e.g. 33 on p5.48xlarge), plus those of the network the stack creates (its NAT gateway's
  one, or one per interface endpoint in its one private subnet; none in a network of your own), against "Network
  interfaces per Region", plus the interfaces that already exist in the Region (attached or not: both count).
  The file system's are not in the figure: FSx for Lustre makes "one or more", a number it does not document.

A reservation run (capacity.mode odcr or capacity-block) launches into capacity reserved already: its vCPUs are
not checked against the On-Demand quota (see data/aws_quotas.json, notChecked); its interfaces are.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.catalog.aws import instance_type
from infra.catalog.aws.quotas import Quota, VcpuQuota, network_interface_quota, vcpu_quota
from infra.core.errors import Problem
from infra.training.aws.config import TrainingSpec
from infra.training.aws.efa import efa_layout
from infra.training.aws.network import INTERFACE_ENDPOINT_SERVICES

NODE_COUNT = "mlinfra:training.nodeCount"


@dataclass(frozen=True)
class QuotaNeed:
    """What this run adds to one quota, and how that figure is made."""

    quota: Quota
    planned: int
    basis: str  # "4 x p4d.24xlarge at 96 vCPUs each"
    unit: str  # "vCPUs" / "network interfaces"

    @property
    def family(self) -> VcpuQuota | None:
        return self.quota if isinstance(self.quota, VcpuQuota) else None


@dataclass(frozen=True)
class QuotaVerdict:
    need: QuotaNeed
    value: float  # the quota's applied value (or AWS's default where none is applied)
    in_use: int | None  # None: could not be counted (then taken as 0, and said)

    @property
    def total(self) -> int:
        return self.need.planned + (self.in_use or 0)

    @property
    def exceeded(self) -> bool:
        return self.total > self.value

    def summary(self) -> str:
        quota = self.need.quota
        used = "in use not counted" if self.in_use is None else f"{self.in_use} in use"
        return (
            f"quota {quota.name!r} ({quota.service_code} {quota.quota_code}): {self.total} of {_figure(self.value)} "
            f"{self.need.unit} ({self.need.planned} for this run: {self.need.basis}; {used})"
        )

    def problem(self, region: str) -> Problem:
        """The refusal: names the quota, the figures and the command that raises it."""
        quota, need = self.need.quota, self.need
        used = "in use could not be counted" if self.in_use is None else f"{self.in_use} already in use in the Region"
        return Problem(
            NODE_COUNT,
            f"this run needs {need.planned} {need.unit} ({need.basis}) of quota {quota.name!r} "
            f"({quota.service_code} {quota.quota_code}) in {region}, {used}: {self.total} in all, over the quota's "
            f"{_figure(self.value)}. Raise the quota with `{quota.increase_command(self.total, region)}`, or lower "
            "nodeCount (nothing was deployed)",
        )


def run_quota_needs(spec: TrainingSpec) -> tuple[QuotaNeed, ...]:
    """The quotas this run draws on, and how much of each; a family with no known vCPU quota is left out (said by
    `unchecked_vcpu_reason`)."""
    itype = instance_type(spec.instance_type)
    nodes = spec.node_count
    needs: list[QuotaNeed] = []
    family = vcpu_quota(itype.name)
    if unchecked_vcpu_reason(spec) is None and family is not None:
        needs.append(
            QuotaNeed(family, nodes * itype.vcpus, f"{nodes} x {itype.name} at {itype.vcpus} vCPUs each", "vCPUs")
        )
    layout = efa_layout(itype)
    efa = sum(1 for i in layout if i.is_efa)
    network, which = network_interfaces(spec)
    basis = f"{nodes} nodes x {len(layout)} interfaces each: {len(layout) - efa} ENA and {efa} EFA"
    needs.append(
        QuotaNeed(
            network_interface_quota(),
            nodes * len(layout) + network,
            f"{basis}, and {which}" if network else basis,
            "network interfaces",
        )
    )
    return tuple(needs)


def network_interfaces(spec: TrainingSpec) -> tuple[int, str]:
    """The interfaces of the network the stack creates (components/training/aws/network.py), and what they are: a
    NAT gateway has one; an interface endpoint has one in each subnet it serves (the private one)."""
    if spec.network.vpc_id:
        return 0, ""
    if spec.network.egress == "nat":
        return 1, "1 of the NAT gateway"
    count = len(INTERFACE_ENDPOINT_SERVICES)
    return count, f"{count} of the interface endpoints"


def unchecked_vcpu_reason(spec: TrainingSpec) -> str | None:
    """Why the run's vCPUs are not checked against an On-Demand quota, or None when they are."""
    mode = spec.capacity.mode
    if mode in ("odcr", "capacity-block"):
        return f"capacity.mode {mode}: the nodes launch into their reservation, not on the On-Demand vCPU quota"
    if vcpu_quota(spec.instance_type) is None:
        return f"no On-Demand vCPU quota is known for the family of {spec.instance_type} (data/aws_quotas.json)"
    return None


def _figure(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
