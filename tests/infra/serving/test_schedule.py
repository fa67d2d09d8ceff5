"""Schedules of minimum replicas: windows that tile the week, and the KEDA cron triggers that raise the minimum ahead
of each window by the start-up budget."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.serving import manifests, schedule, startup
from infra.serving.aws.config import AwsModelSpec

WEEKDAYS = ["mon", "tue", "wed", "thu", "fri"]
OFFICE = [
    (WEEKDAYS, "00:00", "07:00", 0),
    (WEEKDAYS, "07:00", "20:00", 2),
    (WEEKDAYS, "20:00", "24:00", 0),
    (["sat", "sun"], "00:00", "24:00", 0),
]
BASE = {"name": "m", "version": "1", "image": "vllm/vllm-openai:v0.33.0", "accelerator": "g5"}


def spans(windows):
    return [(days, start, end) for days, start, end, _ in windows]


def test_a_week_tiled_once_has_no_problem_and_each_kind_of_fault_is_named():
    assert schedule.tiling_problems(spans(OFFICE)) == []
    gap = spans(OFFICE[:3])
    assert schedule.tiling_problems(gap) == [(2, "the week from Sat 00:00 to Mon 00:00 has no window")]
    overlap = [(WEEKDAYS, "00:00", "08:00"), *spans(OFFICE[1:])]
    assert schedule.tiling_problems(overlap) == [(1, "overlaps windows[0] from Mon 07:00 to Mon 08:00")]
    inverted = [(WEEKDAYS, "20:00", "07:00"), *spans(OFFICE[1:])]
    assert "split a window past midnight" in schedule.tiling_problems(inverted)[0][1]


def test_a_window_is_asked_for_ahead_of_its_start_by_the_start_up_budget():
    (trigger,) = schedule.cron_triggers("America/New_York", OFFICE, 0, 858)  # 14.3 min: 15 minutes ahead
    assert (trigger.start, trigger.end, trigger.desired) == ("45 6 * * 1,2,3,4,5", "0 20 * * 1,2,3,4,5", 2)
    assert schedule.cron_windows(trigger.start, trigger.end)[0] == (6 * 60 + 45, 20 * 60)  # Monday
    # Ahead past midnight: Monday 00:10 minus 15 minutes is Sunday 23:55 (cron's weekday 0).
    early = [(["mon"], "00:00", "00:10", 0), (["mon"], "00:10", "24:00", 3)]
    early += [(["tue", "wed", "thu", "fri", "sat", "sun"], "00:00", "24:00", 0)]
    (wrapped,) = schedule.cron_triggers("UTC", early, 0, 900)
    assert (wrapped.start, wrapped.end) == ("55 23 * * 0", "0 0 * * 2")
    assert schedule.cron_windows(wrapped.start, wrapped.end) == [(schedule.WEEK_MINUTES - 5, 24 * 60)]


def test_windows_at_the_floor_need_no_trigger():
    flat = [(schedule.DAYS, "00:00", "24:00", 1)]
    assert schedule.cron_triggers("UTC", flat, 1, 600) == []


@settings(max_examples=200, deadline=None)
@given(
    cuts=st.lists(st.integers(min_value=1, max_value=24 * 60 - 1), min_size=1, max_size=4, unique=True),
    counts=st.lists(st.integers(min_value=0, max_value=5), min_size=5, max_size=5),
)
def test_the_triggers_ask_for_each_windows_minimum_wherever_it_is_above_the_floor(cuts, counts):
    """A day cut into windows (the same every day): at every minute of the week the triggers' ask, or the floor,
    is the scheduled minimum (no lead, so a trigger's window is the window itself)."""
    bounds = [0, *sorted(cuts), 24 * 60]
    clock = [f"{b // 60:02d}:{b % 60:02d}" if b < 24 * 60 else "24:00" for b in bounds]
    windows = [(list(schedule.DAYS), clock[i], clock[i + 1], counts[i % 5]) for i in range(len(bounds) - 1)]
    assert schedule.tiling_problems(spans(windows)) == []
    floor = min(w[3] for w in windows)
    triggers = schedule.cron_triggers("UTC", windows, floor, 0)
    for minute in range(0, schedule.WEEK_MINUTES, 37):
        asked = [
            t.desired
            for t in triggers
            for start, end in schedule.cron_windows(t.start, t.end)
            if (minute - start) % schedule.WEEK_MINUTES < (end - start) % schedule.WEEK_MINUTES
        ]
        assert max([floor, *asked]) == schedule.minimum_at(windows, minute), minute


def office_model(**fields) -> AwsModelSpec:
    windows = [{"days": d, "from": s, "to": e, "minReplicas": n} for d, s, e, n in OFFICE]
    return AwsModelSpec.model_validate(
        {**BASE, "schedule": {"timezone": "America/New_York", "windows": windows}, "scaleToZero": {}, **fields}
    )


def test_a_schedule_sets_the_minimum_and_a_different_minreplicas_is_refused():
    model = office_model()
    assert (model.min_replicas, model.scheduled_peak) == (0, 2)
    assert office_model(minReplicas=0).min_replicas == 0  # the same figure round-trips
    with pytest.raises(ValueError, match="leave minReplicas unset"):
        office_model(minReplicas=2)
    with pytest.raises(ValueError, match="not an IANA time zone"):
        AwsModelSpec.model_validate(
            {**BASE, "schedule": {"timezone": "Mars/Olympus", "windows": [{"days": ["mon"], "from": "00:00",
             "to": "24:00", "minReplicas": 1}]}}
        )  # fmt: skip


def test_the_scaled_object_of_a_scheduled_model_at_zero():
    model = office_model()
    budgets = startup.model_budgets(model, {"g5.xlarge": 10.0})
    spec = manifests.scaled_object(model, "models", budgets)["spec"]
    assert spec["minReplicaCount"] == 0
    slow = startup.slowest(budgets)
    assert spec["cooldownPeriod"] >= slow.from_zero_seconds and spec["cooldownPeriod"] % 60 == 0
    by_type = {t["type"]: t for t in spec["triggers"] if t["type"] == "cron"}
    assert by_type["cron"]["metadata"]["timezone"] == "America/New_York"
    assert by_type["cron"]["metadata"]["desiredReplicas"] == "2"
    held = next(t for t in spec["triggers"] if t["name"] == "held")
    assert held["metadata"]["activationThreshold"] == "0"  # one held request wakes the pool
    assert 'inference_pool="m"' in held["metadata"]["query"] and held["metadata"]["query"].endswith("or vector(0)")
    plain = manifests.scaled_object(AwsModelSpec.model_validate(BASE), "models")["spec"]
    assert "cooldownPeriod" not in plain and {t["name"] for t in plain["triggers"]} == {"queue-depth", "kv-cache"}
