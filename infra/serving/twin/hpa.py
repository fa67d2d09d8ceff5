"""The HorizontalPodAutoscaler's algorithm as documented, pure (docs/simulate.md).

Sources (checked 2026-11-27): kubernetes/website content/en/docs/tasks/run-application/horizontal-pod-autoscale.md
(commit 01650250b631e2cae823654bef3b4e775f18eab4: the ratio formula, the 0.1 tolerance, "Scaling policies",
"Stabilization window", "Default Behavior"), and the controller it describes (kubernetes/kubernetes
pkg/controller/podautoscaler: replica_calculator.go for external metrics, horizontal.go for the behaviour):

- **Ratio.** desired = ceil(current x metric / target); no change while |ratio - 1| <= tolerance. An external
  metric with an AverageValue target is divided by the target per pod: desired = ceil(total / target).
- **Stabilisation.** Every loop records its raw recommendation; a scale-up takes the *lowest* recommendation of
  the scale-up window, a scale-down the *highest* of the scale-down window.
- **Policies.** Each policy bounds the change over its period, counted from the replicas at the period's start
  (Pods: that many; Percent: that share, rounded up on the way up, down on the way down); selectPolicy Max takes
  the policy allowing the most change, Min the least, Disabled none. The period's start is the current count
  less the replicas added and plus those removed within the period (calculateScaleUpLimitWithScalingRules and
  calculateScaleDownLimitWithBehaviors take both directions' events in current horizontal.go, as Karmada's
  copy of it shows; older releases counted one direction only).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

TOLERANCE = 0.1  # --horizontal-pod-autoscaler-tolerance default (the docs' "0.1 by default")
SYNC_SECONDS = 15.0  # --horizontal-pod-autoscaler-sync-period default


@dataclass(frozen=True)
class Policy:
    type: Literal["Pods", "Percent"]
    value: int
    period_seconds: int


@dataclass(frozen=True)
class Rules:
    """One direction of `behavior` (scaleUp or scaleDown)."""

    stabilization_seconds: float
    policies: tuple[Policy, ...]
    select: Literal["Max", "Min", "Disabled"] = "Max"


# The documented defaults ("Default Behavior"), merged field by field with what a ScaledObject sets.
DEFAULT_UP = Rules(0, (Policy("Percent", 100, 15), Policy("Pods", 4, 15)), "Max")
DEFAULT_DOWN = Rules(300, (Policy("Percent", 100, 15),), "Max")


@dataclass(frozen=True)
class Behavior:
    up: Rules = DEFAULT_UP
    down: Rules = DEFAULT_DOWN


def ratio_replicas(current: int, metric: float, target: float, tolerance: float = TOLERANCE) -> int:
    """desired = ceil(current x metric / target), unchanged within the tolerance (a Value target)."""
    if current == 0:
        return math.ceil(metric / target)
    ratio = metric / target
    if abs(ratio - 1.0) <= tolerance:
        return current
    return math.ceil(ratio * current)


def average_value_replicas(current: int, total: float, target_per_pod: float, tolerance: float = TOLERANCE) -> int:
    """An external metric with an AverageValue target: ceil(total / target), unchanged while the per-pod value
    is within the tolerance of the target."""
    if current > 0 and abs(1.0 - total / (target_per_pod * current)) <= tolerance:
        return current
    return math.ceil(total / target_per_pod)


def _limit(policy: Policy, period_start: int, up: bool) -> int:
    """The replicas one policy allows, counted from the replicas at the start of its period."""
    if policy.type == "Pods":
        return period_start + policy.value if up else period_start - policy.value
    if up:
        return math.ceil(period_start * (1 + policy.value / 100))
    return int(period_start * (1 - policy.value / 100))


@dataclass
class Hpa:
    """One HPA's state between loops: its recommendations and the scale events of the policies' periods."""

    min_replicas: int
    max_replicas: int
    behavior: Behavior = field(default_factory=Behavior)
    recommendations: deque[tuple[float, int]] = field(default_factory=deque)
    events: deque[tuple[float, int]] = field(default_factory=deque)  # (time, change) applied by this HPA

    def decide(self, now: float, current: int, desired: int) -> int:
        """The replicas after one loop, given the metrics' raw recommendation `desired`."""
        up, down = self.behavior.up, self.behavior.down
        keep = max(up.stabilization_seconds, down.stabilization_seconds)
        while self.recommendations and self.recommendations[0][0] <= now - keep:
            self.recommendations.popleft()
        longest = max((p.period_seconds for p in (*up.policies, *down.policies)), default=0)
        while self.events and self.events[0][0] <= now - longest:
            self.events.popleft()
        up_rec = down_rec = desired
        for t, value in self.recommendations:
            if t > now - up.stabilization_seconds:
                up_rec = min(up_rec, value)
            if t > now - down.stabilization_seconds:
                down_rec = max(down_rec, value)
        self.recommendations.append((now, desired))
        stable = current
        if stable < up_rec:
            stable = up_rec
        if stable > down_rec:
            stable = down_rec
        result = self._normalize(now, current, stable)
        if result != current:
            self.events.append((now, result - current))
        return result

    def _normalize(self, now: float, current: int, wanted: int) -> int:
        """`wanted` within the direction's policies and the min/max replicas."""
        if wanted > current:
            if self.behavior.up.select == "Disabled":
                return current
            return max(current, min(wanted, self._bound(self.behavior.up, now, current, True), self.max_replicas))
        if wanted < current:
            if self.behavior.down.select == "Disabled":
                return current
            return min(current, max(wanted, self._bound(self.behavior.down, now, current, False), self.min_replicas))
        return max(self.min_replicas, min(self.max_replicas, wanted))

    def _bound(self, rules: Rules, now: float, current: int, up: bool) -> int:
        """The most (up) or fewest (down) replicas the selected policy allows now: each policy counts from the
        replicas at the start of its period, current - added + deleted within it (horizontal.go since the scale
        limits take both the scale-up and the scale-down events)."""
        proposals = []
        for policy in rules.policies:
            changed = sum(c for t, c in self.events if t > now - policy.period_seconds)  # added less deleted
            proposals.append(_limit(policy, current - changed, up))
        most_change = max(proposals) if up else min(proposals)
        least_change = min(proposals) if up else max(proposals)
        return most_change if rules.select == "Max" else least_change
