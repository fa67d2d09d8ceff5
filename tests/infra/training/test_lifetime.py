"""The run's lifetime: config and the mandatory lifetime policy agree on the boundary, and a fixed expiry
past the maximum lifetime is refused before anything is declared, on both clouds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from infra.cli import main
from infra.training.lifetime import run_expiry
from infra.training.spec import EXPIRES_AT_FORMAT, MAX_TTL_HOURS, LifecycleSpec


@pytest.mark.parametrize("seconds", [0, 1, 59])
def test_the_provisional_expiry_never_lies_past_the_ttl(seconds):
    now = datetime(2026, 11, 21, 9, 30, seconds, tzinfo=UTC)
    text, provisional, problem = run_expiry(LifecycleSpec(ttl_hours=MAX_TTL_HOURS), now, dry_run=True)
    at = datetime.strptime(text, EXPIRES_AT_FORMAT).replace(tzinfo=UTC)
    assert provisional and problem is None
    assert timedelta(hours=MAX_TTL_HOURS) - timedelta(minutes=1) < at - now <= timedelta(hours=MAX_TTL_HOURS)


def test_the_documented_maximum_ttl_passes_the_mandatory_lifetime_policy(capsys):
    code = main(["policy", "--stack", "training-demo", "-c", f"mlinfra:training.lifecycle.ttlHours={MAX_TTL_HOURS}"])
    assert code == 0, capsys.readouterr().out
    assert "training-expiry-within-max-lifetime" not in capsys.readouterr().out


@pytest.mark.parametrize("stack", ["training-demo", "training-gcp-demo"])
def test_a_fixed_expiry_past_the_maximum_lifetime_exits_2(stack, capsys):
    later = (datetime.now(UTC) + timedelta(hours=MAX_TTL_HOURS + 2)).strftime(EXPIRES_AT_FORMAT)
    assert main(["preview", "--stack", stack, "-c", f"mlinfra:training.lifecycle.expiresAt={later}"]) == 2
    assert capsys.readouterr().err.startswith(
        f"error: mlinfra:training.lifecycle.expiresAt: {later} is 33"  # 337 or 338 hours away
    )


def test_an_expiry_problem_does_not_hide_the_other_lifecycle_findings(capsys):
    code = main(
        [
            "preview",
            "--stack",
            "training-demo",
            "-c",
            "mlinfra:training.lifecycle.expiresAt=2027-02-30T00:00:00Z",
            "-c",
            "mlinfra:training.lifecycle.gracePeriodMinutes=120",
            "-c",
            "mlinfra:training.lifecycle.ttlHours=1",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "mlinfra:training.lifecycle.expiresAt: '2027-02-30T00:00:00Z' is not a real UTC time" in err
    assert "mlinfra:training.lifecycle.gracePeriodMinutes: 120 minutes is not shorter than ttlHours" in err
