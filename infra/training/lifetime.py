"""What every training plan derives from its run id, expires-at and lifecycle, on either cloud (pure)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from infra.core.errors import InputError, Problem
from infra.registry.layout import ROOTS, checkpoints_prefix, runs_prefix
from infra.training.spec import EXPIRES_AT_FORMAT, EXPIRES_AT_KEY, MAX_TTL_HOURS, LifecycleSpec, RunSpec


class RunLifetime:
    """What every training plan derives from its run id, expires-at and lifecycle (AWS and GCP)."""

    run_id: str
    expires_at: str
    lifecycle: LifecycleSpec

    @property
    def expires_at_epoch(self) -> int:
        return int(datetime.strptime(self.expires_at, EXPIRES_AT_FORMAT).replace(tzinfo=UTC).timestamp())

    @property
    def stop_at_epoch(self) -> int:
        """When the nodes ask the job to stop: the grace period before expires-at (Unix time)."""
        return self.expires_at_epoch - 60 * self.lifecycle.grace_period_minutes

    @property
    def prefixes(self) -> dict[str, str]:
        """Registry prefixes of this run."""
        return {
            "datasets": ROOTS["datasets"],
            "checkpoints": checkpoints_prefix(self.run_id),
            "runs": runs_prefix(self.run_id),
        }


def checked_expiry(findings: list[Problem], spec: RunSpec, now: datetime, dry_run: bool) -> tuple[str, bool]:
    """(expires-at, provisional?) once neither the meaning checks' `findings` nor the expiry has a
    problem; otherwise InputError with all of them, so every plan reports everything at once."""
    expires_at, provisional, problem = run_expiry(spec.lifecycle, now, dry_run)
    if problem and problem not in findings:  # the meaning checks may have found it already
        findings = [*findings, problem]
    if findings:
        raise InputError(findings)
    return expires_at, provisional


def fixed_expiry(fixed: str, now: datetime) -> tuple[datetime | None, Problem | None]:
    """A fixed expiresAt as a time, or the problem with it: not a real UTC time, or further ahead than the
    maximum lifetime (the mandatory policy's bound). The config tier and the plan both judge it here."""
    try:
        at = datetime.strptime(fixed, EXPIRES_AT_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None, Problem(EXPIRES_AT_KEY, f"{fixed!r} is not a real UTC time (YYYY-MM-DDTHH:MM:SSZ)")
    if at - now > timedelta(hours=MAX_TTL_HOURS):
        return at, Problem(
            EXPIRES_AT_KEY,
            f"{fixed} is {(at - now).total_seconds() / 3600:.0f} hours away, beyond the maximum lifetime of "
            f"{MAX_TTL_HOURS} hours; checkpoint and start a new run",
        )
    return at, None


def run_expiry(lifecycle: LifecycleSpec, now: datetime, dry_run: bool) -> tuple[str, bool, Problem | None]:
    """(expires-at, provisional?, problem). A preview without a fixed expiry shows now + ttlHours,
    rounded down to the minute (never past the ttl, so ttlHours at the maximum passes the mandatory lifetime
    policy); `pulumi up` needs it fixed in config so updates never move it. A fixed expiry may not lie
    further ahead than the maximum lifetime."""
    fixed = lifecycle.expires_at
    if fixed:
        at, problem = fixed_expiry(fixed, now)
        if at is None or problem:
            return fixed, False, problem
        if not dry_run and at <= now:
            return (
                fixed,
                False,
                Problem(
                    EXPIRES_AT_KEY,
                    f"{fixed} has passed: this run's lifetime is over; tear it down (`python -m infra teardown --stack "
                    "<stack>`), or start a new run with a new runId and no expiresAt",
                ),
            )
        return fixed, False, None
    at = now.astimezone(UTC) + timedelta(hours=lifecycle.ttl_hours)
    at = datetime.fromtimestamp(math.floor(at.timestamp() / 60) * 60, tz=UTC)
    text = at.strftime(EXPIRES_AT_FORMAT)
    if dry_run:
        return text, True, None
    return (
        text,
        False,
        Problem(
            EXPIRES_AT_KEY,
            "required for `pulumi up`, so the run's expiry is fixed once: start it with `python -m infra run`, or "
            f"`pulumi config set --path mlinfra:training.lifecycle.expiresAt {text}`",
        ),
    )
