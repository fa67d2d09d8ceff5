"""The performance model against published measurements: every point's error is stated, the held-out ones
are bounded, and the stored efficiency factors are exactly what the tuning points give."""

from __future__ import annotations

import pytest

from infra.serving import calibration
from infra.serving.performance import efficiency

# Held-out bounds on |predicted - measured| / measured, per metric. TTFT is looser: engines of the points
# differ most in how they run a single prefill (chunking, kernel choice); the model has one factor for it.
BOUNDS = {"throughput": 0.35, "tpot": 0.35, "ttft": 0.50}
HELD_OUT = calibration.points("test")


def test_points_are_used_to_tune_or_to_test_never_both():
    every = calibration.points()
    assert len({p.id for p in every}) == len(every)
    assert {p.use for p in every} <= {"tune", "test", "excluded"}
    tune, test = calibration.points("tune"), calibration.points("test")
    assert not {p.id for p in tune} & {p.id for p in test}
    assert len(test) >= len(tune)  # most points are held out
    assert all(p.source and p.date and p.value > 0 for p in every)
    raw = {p["id"]: p for p in calibration.load()["points"]}
    assert all("excluded:" in raw[p.id].get("note", "") for p in every if p.use == "excluded")


def test_the_stored_factors_are_the_fit_of_the_tuning_points():
    for kind in ("gpu", "neuron"):
        assert calibration.fit(kind) == efficiency(kind)


def test_the_fit_never_sees_a_held_out_point(monkeypatch):
    raw = calibration.load()
    changed = {**raw, "points": [{**p, "value": p["value"] * 10} if p["use"] != "tune" else p for p in raw["points"]]}
    monkeypatch.setattr(calibration, "load", lambda: changed)
    for kind in ("gpu", "neuron"):
        assert calibration.fit(kind) == efficiency(kind)


@pytest.mark.parametrize("point", HELD_OUT, ids=[p.id for p in HELD_OUT])
def test_held_out_error_is_within_its_bound(point):
    error = calibration.error(point)
    print(f"{point.id}: measured {point.value:g}, model {calibration.predict(point):.4g}, error {error:+.0%}")
    assert abs(error) <= BOUNDS[point.metric], f"{point.id}: {error:+.0%} exceeds {BOUNDS[point.metric]:.0%}"


def test_the_table_states_every_point():
    lines = calibration.table(calibration.points())
    assert len(lines) == 2 + len([p for p in calibration.points() if p.use != "excluded"])
    assert all(line.endswith("% |") for line in lines[2:])
