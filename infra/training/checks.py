"""Meaning checks every training config shares (second tier): the job and the lifecycle."""

from __future__ import annotations

from datetime import UTC, datetime

from infra.core.errors import Problem
from infra.training.lifetime import fixed_expiry
from infra.training.spec import KEY as P
from infra.training.spec import RunSpec


def run_findings(spec: RunSpec) -> list[Problem]:
    return _job_findings(spec) + _lifecycle_findings(spec)


def _job_findings(spec: RunSpec) -> list[Problem]:
    first = spec.job.command[0].rsplit("/", 1)[-1]
    if first in ("python", "python3", "torchrun"):
        return [
            Problem(
                P + "job.command",
                f"starts with {first!r}, but torchrun runs the command as a Python script: "
                'give the script and its arguments, e.g. ["/opt/job/train.py", "--epochs", "3"]',
            )
        ]
    return []


def _lifecycle_findings(spec: RunSpec) -> list[Problem]:
    lifecycle = spec.lifecycle
    findings = []
    if lifecycle.expires_at:
        _, problem = fixed_expiry(lifecycle.expires_at, datetime.now(UTC))
        findings += [problem] if problem else []
    if lifecycle.grace_period_minutes >= lifecycle.ttl_hours * 60:
        findings.append(
            Problem(
                P + "lifecycle.gracePeriodMinutes",
                f"{lifecycle.grace_period_minutes} minutes is not shorter than ttlHours ({lifecycle.ttl_hours} h): "
                "the job would be asked to stop before it starts; use fewer minutes or a longer ttlHours",
            )
        )
    return findings
