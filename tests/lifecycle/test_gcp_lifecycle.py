"""The lifecycle commands recognise GCP training stacks: reap plans them by expiresAt (an expired one needs a
human, since teardown is not yet on GCP); run, teardown and audit say "not yet on GCP" and exit 2."""
from datetime import datetime, timezone

import pytest

from infra.lifecycle.reap import StackFacts, plan_reap
from tests.conftest import run_cli

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def test_reap_plans_gcp_stacks_by_expiry():
    decisions = plan_reap([
        StackFacts("gcp-live", "training", deployed=True, expires_at_output="2026-03-01T13:00:00Z", cloud="gcp"),
        StackFacts("gcp-old", "training", deployed=True, expires_at_output="2026-03-01T11:00:00Z", cloud="gcp"),
    ], NOW)
    assert [(d.stack, d.action) for d in decisions] == [("gcp-live", "keep"), ("gcp-old", "problem")]
    assert decisions[1].reason == (
        "expired at 2026-03-01T11:00:00Z, 1h 00m ago; its nodes were deleted by Compute Engine at expires-at, but "
        "teardown is not yet on GCP: remove the rest with `pulumi destroy -s gcp-old`")


@pytest.mark.parametrize("args, key, words", [
    (("run", "--stack", "training-gcp-demo"), "--stack", "`run` is not yet on GCP (nothing was changed)"),
    (("teardown", "--stack", "training-gcp-demo", "--yes"), "--stack", "`teardown` is not yet on GCP"),
    (("audit", "--run-id", "demo-llama-7b-gcp-001", "--cloud", "gcp"), "--cloud", "audit is not yet on GCP"),
])
def test_commands_not_yet_on_gcp_exit_2(args, key, words):
    done = run_cli(*args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{key}: " in done.stderr and words in done.stderr and "Traceback" not in done.stderr
