"""A canary's plan and judgement: the steps it accepts, the decision at each window's end, and a state that logs
every step and can be taken up again from the registry's copy."""

from __future__ import annotations

import pytest

from infra.serving import canary

GOOD = canary.Figures(requests=500, errors=1, ttft_p95=0.8, tpot_p95=0.05)
PLAN = canary.Plan(slo=(2.0, 0.1))


@pytest.mark.parametrize(
    ("steps", "words"),
    [
        ((), "no steps"),
        ((10, 5, 100), "must increase"),
        ((10, 50), "the last step must be 100"),
        ((0, 100), "from 1 to 100"),
        ((10, 10, 100), "must increase"),
        ((50, 150), "from 1 to 100"),
    ],
)
def test_steps_that_are_not_a_canary_are_named(steps, words):
    assert words in canary.steps_problem(steps)


def test_good_steps_pass():
    assert canary.steps_problem((10, 50, 100)) is None and canary.steps_problem((100,)) is None


def test_the_decision_at_a_windows_end():
    assert canary.judge(PLAN, GOOD, GOOD).decision == "go"
    slower = canary.Figures(500, 1, 0.8 * 1.3, 0.05)
    verdict = canary.judge(PLAN, GOOD, slower)
    assert verdict.decision == "roll back" and verdict.reasons == (
        "TTFT p95 1,040 ms against the old version's 800 ms (margin 20%)",
    )
    failing = canary.Figures(500, 30, 0.8, 0.05)
    assert "6.00% of its requests failed" in canary.judge(PLAN, GOOD, failing).reasons[0]
    off_slo = canary.Figures(500, 1, 2.5, 0.05)
    old_slow = canary.Figures(500, 1, 2.4, 0.05)  # within the margin of a slow old version, but over the SLO
    assert canary.judge(PLAN, old_slow, off_slo).reasons == ("TTFT p95 2,500 ms misses the SLO (2,000 ms)",)
    few = canary.Figures(20, 0, 0.5, 0.04)
    assert canary.judge(PLAN, GOOD, few).decision == "wait"


def test_a_canary_goes_step_by_step_logs_each_and_resumes_from_its_stored_state():
    state = canary.State("m", "production", "2025-05-20", "2025-06-01", (10, 50, 100))
    state = canary.advance(PLAN, state, "t1", GOOD, GOOD)
    assert (state.step, state.share, state.status) == (1, 50, "running")
    resumed = canary.State.from_json(state.to_json())  # another process takes it up from the registry
    assert resumed == state
    resumed = canary.advance(PLAN, resumed, "t2", GOOD, canary.Figures(20, 0, 0.5, 0.04))
    assert resumed.step == 1 and resumed.log[-1]["decision"] == "wait"
    resumed = canary.advance(PLAN, resumed, "t3", GOOD, GOOD)
    # At 100% the old version serves nothing: the new is judged against the old's last window.
    done = canary.advance(PLAN, resumed, "t4", canary.Figures(0, 0, None, None), GOOD)
    assert done.status == "promoted" and done.share == 100
    assert [e["decision"] for e in done.log] == ["go", "wait", "go", "go"]
    assert done.log[-1]["old"] == done.log[-2]["old"]
    assert canary.advance(PLAN, done, "t5", GOOD, GOOD) is done  # nothing moves once it has ended


def test_a_worse_version_rolls_back_and_the_alias_keeps_the_old():
    state = canary.State("m", "production", "old", "new", (10, 50, 100))
    state = canary.advance(PLAN, state, "t1", GOOD, canary.Figures(500, 1, 0.8, 0.09))
    assert state.status == "rolled back" and state.share == 0
    assert "TPOT p95 90 ms against the old version's 50 ms" in state.log[-1]["reasons"][0]
