"""`run`'s quota pre-flight: before anything is created, the run's needs (infra.training.aws.quota) against the
Region's Service Quotas and what is already in use there.

A need over its quota refuses the run (InputError, exit 2, naming the quota, the figures and the command that
raises it). A quota or a count the cloud will not give (AccessDenied, no network, a Region without Service
Quotas) is one warning line and the run goes on: the check then cannot stop a run the launch would refuse, and
says so. `--skip-quota-check` skips it without asking AWS.
"""

from __future__ import annotations

from typing import Protocol

from infra.catalog.aws.quotas import Quota, VcpuQuota
from infra.core.errors import InputError
from infra.ops.runtime import Runtime, cloud_error
from infra.training.aws.config import TrainingSpec
from infra.training.aws.quota import QuotaVerdict, run_quota_needs, unchecked_vcpu_reason


class QuotaReadError(Exception):
    """The cloud answered, but not what a quota or its use can be read from (warned, like a cloud error)."""


class QuotaSource(Protocol):
    """The Region's quotas and what is in use there (`aws.quotas.AwsQuotas`; tests use the moto server)."""

    region: str

    def quota_value(self, quota: Quota) -> float:
        """The applied value of the quota, or AWS's default where none is applied."""

    def vcpus_in_use(self, quota: VcpuQuota) -> int:
        """vCPUs of the On-Demand instances running or pending in the Region whose family counts against `quota`."""

    def network_interfaces_in_use(self) -> int:
        """Network interfaces that exist in the Region (attached or not)."""


def check_quotas(spec: TrainingSpec, source: QuotaSource, rt: Runtime) -> list[QuotaVerdict]:
    """Each need against its quota; InputError with every need that does not fit. A cloud error reading a quota
    skips that quota (warned); one counting its use counts it as 0 (warned)."""
    reason = unchecked_vcpu_reason(spec)
    if reason:
        rt.say(f"quota: vCPUs not checked ({reason})")
    verdicts: list[QuotaVerdict] = []
    for need in run_quota_needs(spec):
        quota = need.quota
        try:
            value = source.quota_value(quota)
        except Exception as error:
            text = _cloud_text(error)
            rt.say(
                f"warning: quota {quota.name!r} ({quota.service_code} {quota.quota_code}) not checked: {text}; "
                f"the run goes on (it needs {need.planned} {need.unit}: {need.basis})"
            )
            continue
        try:
            in_use: int | None = source.vcpus_in_use(need.family) if need.family else source.network_interfaces_in_use()
        except Exception as error:
            rt.say(f"warning: {need.unit} in use in {source.region} not counted: {_cloud_text(error)}")
            in_use = None
        verdicts.append(QuotaVerdict(need, value, in_use))
    refused = [v for v in verdicts if v.exceeded]
    if refused:
        raise InputError([v.problem(source.region) for v in refused])
    for verdict in verdicts:
        rt.say(f"quota: {verdict.summary()}")
    return verdicts


def _cloud_text(error: Exception) -> str:
    text = str(error) if isinstance(error, QuotaReadError) else cloud_error(error)
    if text is None:
        raise error
    return text
