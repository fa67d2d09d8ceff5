"""The HPA's algorithm against the Kubernetes documentation's worked examples (kubernetes/website
content/en/docs/tasks/run-application/horizontal-pod-autoscale.md at 01650250b631e2cae823654bef3b4e775f18eab4,
read 2026-11-27): the ratio formula and tolerance, "Scaling policies", "Stabilization window", "Default Behavior"."""

from __future__ import annotations

import pytest

from infra.serving.twin.hpa import (
    DEFAULT_DOWN,
    DEFAULT_UP,
    Behavior,
    Hpa,
    Policy,
    Rules,
    average_value_replicas,
    ratio_replicas,
)


def test_the_ratio_doubles_or_halves_the_replicas_as_the_docs_example():
    # "if the current metric value is 200m, and the desired value is 100m, the number of replicas will be
    # doubled ... If the current value is instead 50m, you'll halve the number of replicas"
    assert ratio_replicas(4, 200, 100) == 8
    assert ratio_replicas(4, 50, 100) == 2


@pytest.mark.parametrize(("metric", "expected"), [(105, 10), (95, 10), (90, 10), (111, 12), (89, 9)])
def test_no_change_within_the_tolerance_of_one_tenth(metric, expected):
    assert ratio_replicas(10, metric, 100) == expected


def test_an_average_value_target_divides_the_total_by_the_target_per_pod():
    assert average_value_replicas(2, 20, 8) == 3  # ceil(20 / 8)
    assert average_value_replicas(2, 16.8, 8) == 2  # 8.4 per pod: within 10% of 8
    assert average_value_replicas(2, 0, 8) == 0  # min replicas applied by the HPA, not here


def _down(policies, select="Max", window=0):
    return Hpa(1, 100, Behavior(DEFAULT_UP, Rules(window, tuple(policies), select)))


def test_scale_down_policies_take_the_larger_change_as_the_docs_example():
    # Pods 4 / 60 s and Percent 10 / 60 s from 80 replicas towards 10: "during the first step 8 replicas will be
    # reduced. In the next iteration when the number of replicas is 72, 10% of the pods is 7.2 but the number is
    # rounded up to 8 ... When the number of replicas falls below 40 the first policy (Pods) is applied and 4
    # replicas will be reduced at a time."
    hpa = _down([Policy("Pods", 4, 60), Policy("Percent", 10, 60)])
    replicas, seen = 80, []
    for loop in range(12):
        replicas = hpa.decide(loop * 60.0, replicas, 10)
        seen.append(replicas)
    assert seen[:2] == [72, 64]
    changes = [a - b for a, b in zip([80, *seen], seen, strict=False)]
    assert all(c == 4 for a, c in zip([80, *seen], changes, strict=False) if a <= 40)


def test_the_period_counts_changes_already_made():
    hpa = _down([Policy("Pods", 4, 60), Policy("Percent", 10, 60)])
    assert hpa.decide(0, 80, 10) == 72
    assert hpa.decide(15, 72, 10) == 72  # within the minute the 8 already removed use the policy up
    assert hpa.decide(61, 72, 10) == 64


def test_select_policy_min_takes_the_smaller_change():
    # "no more than 5 Pods are removed per minute": Percent 10 + Pods 5 with selectPolicy Min
    hpa = _down([Policy("Percent", 10, 60), Policy("Pods", 5, 60)], select="Min")
    assert hpa.decide(0, 80, 10) == 75
    fresh = _down([Policy("Percent", 10, 60), Policy("Pods", 5, 60)], select="Min")
    assert fresh.decide(0, 30, 10) == 27  # 10% of 30 is 3, fewer than 5


def test_disabled_never_scales_that_way():
    hpa = _down([Policy("Pods", 4, 60)], select="Disabled")
    assert hpa.decide(0, 10, 1) == 10


def test_default_scale_up_adds_four_pods_or_doubles_every_fifteen_seconds():
    # "4 pods or a 100% of the currently running replicas will be added every 15 seconds"
    assert Hpa(1, 100).decide(0, 1, 50) == 5
    assert Hpa(1, 100).decide(0, 10, 50) == 20
    hpa = Hpa(1, 100)
    assert hpa.decide(0, 2, 50) == 6
    assert hpa.decide(5, 6, 50) == 6  # the 15 s period's change is spent
    assert hpa.decide(16, 6, 50) == 12


def test_the_scale_down_window_keeps_the_highest_recommendation():
    # "uses the highest value from the specified interval": 300 s by default
    hpa = Hpa(1, 100)
    assert hpa.decide(0, 10, 10) == 10
    assert hpa.decide(15, 10, 2) == 10
    assert hpa.decide(299, 10, 2) == 10
    assert hpa.decide(301, 10, 2) == 2  # the 10 of t=0 has left the window
    assert DEFAULT_DOWN.stabilization_seconds == 300


def test_one_low_sample_does_not_scale_down_while_a_window_holds():
    # skypilot #4444's failure: one noisy sample resets scaling. Under a scale-down window it cannot.
    steady, windowless = (
        Hpa(1, 10, Behavior(down=Rules(300, DEFAULT_DOWN.policies))),
        _down([Policy("Percent", 100, 15)]),
    )
    for hpa in (steady, windowless):
        hpa.decide(0, 6, 6)
    assert steady.decide(15, 6, 1) == 6
    assert windowless.decide(15, 6, 1) == 1


def test_scale_up_window_takes_the_lowest_recommendation():
    hpa = Hpa(1, 100, Behavior(up=Rules(60, DEFAULT_UP.policies)))
    assert hpa.decide(0, 2, 2) == 2
    assert hpa.decide(15, 2, 8) == 2  # the 2 of t=0 is still in the 60 s window
    assert hpa.decide(61, 2, 8) == 6  # then at most 4 pods per 15 s


def test_min_and_max_bound_the_result():
    assert Hpa(2, 5).decide(0, 4, 50) == 5
    assert Hpa(2, 5, Behavior(down=Rules(0, DEFAULT_DOWN.policies))).decide(0, 4, 0) == 2


def test_a_period_counts_both_directions_changes():
    # horizontal.go: periodStartReplicas = current - added + deleted in the period (both event lists)
    hpa = Hpa(1, 100, Behavior(Rules(0, (Policy("Pods", 4, 60),)), Rules(0, (Policy("Pods", 4, 60),))))
    assert hpa.decide(0, 10, 4) == 6  # down 4
    # the period began at 10 (6 now, 4 removed in it): up to 10 + 4 = 14, not 6 + 4 as one direction would give
    assert hpa.decide(15, 6, 30) == 14
