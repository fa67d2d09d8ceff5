"""KEDA's part of the chain, pure (docs/simulate.md): the ScaledObject's triggers, their metrics, and the
scaling between zero and one that KEDA does itself.

Sources (KEDA 2.16, the app version of the pinned chart keda 2.16.1; keda.sh/docs/2.16/reference/scaledobject-spec/
and keda.sh/docs/2.16/concepts/scaling-deployments/, checked 2026-11-27):

- KEDA makes an HPA whose minReplicas is max(minReplicaCount, 1) and maxReplicas maxReplicaCount; each trigger
  is an external metric with the trigger's metricType (AverageValue by default, or Value) and its threshold as
  the target. The HPA then runs as in hpa.py, querying the metric (KEDA asks Prometheus at that moment) every
  sync period.
- KEDA itself checks every pollingInterval (default 30 s) whether any trigger is active (its value above
  activationThreshold, default 0). With minReplicaCount 0: 0 -> 1 as soon as one is active; 1 -> 0 (or to
  idleReplicaCount) once none has been active for cooldownPeriod (default 300 s). While the target has 0
  replicas the HPA does nothing.

Only the Prometheus queries mlinfra writes are read (vllm:num_requests_waiting summed, vllm:num_requests_running
averaged over a batch size, the KV cache use averaged, the requests the front door holds summed) and the cron
triggers of a schedule (each window's desiredReplicas, reported as an AverageValue of target 1, so the HPA asks for
that many while the window is open); another query is refused by name, not guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from infra.serving.servers import HELD_METRIC
from infra.serving.twin.hpa import Behavior, average_value_replicas, ratio_replicas

Series = Literal["waiting", "running", "kv", "held", "schedule"]
WEEK_SECONDS = 7 * 86400.0
Aggregate = Literal["sum", "avg"]

_RANGE = re.compile(r"\[(\d+)([smh])\]")
_SLOTS = re.compile(r"\)\s*/\s*([0-9.]+)\s*\)")
_UNIT = {"s": 1, "m": 60, "h": 3600}


class UnknownQuery(ValueError):
    """A trigger whose Prometheus query the twin cannot evaluate."""


@dataclass(frozen=True)
class Query:
    """A Prometheus query of mlinfra's form: aggregate(avg_over_time(series[window])) [/ divisor]."""

    series: Series
    aggregate: Aggregate
    window_seconds: float
    divisor: float = 1.0
    # A schedule's windows: (start, end, desired replicas), seconds of the week from Monday 00:00 in its time zone
    # (a window that wraps past Sunday has end < start).
    windows: tuple[tuple[float, float, float], ...] = ()

    def scheduled(self, second_of_week: float) -> float:
        """The replicas the open windows ask for (0 outside every window)."""
        wanted = 0.0
        for start, end, desired in self.windows:
            if (second_of_week - start) % WEEK_SECONDS < (end - start) % WEEK_SECONDS:
                wanted = max(wanted, desired)
        return wanted

    def value(self, per_pod_averages: list[float]) -> float:
        """The query's value from each pod's average over the window (`or vector(0)`: 0 without pods)."""
        if not per_pod_averages:
            return 0.0
        total = left_to_right(per_pod_averages)
        return (total if self.aggregate == "sum" else total / len(per_pod_averages)) / self.divisor


def left_to_right(values: list[float]) -> float:
    """The floats' sum, added one after another: the same bits compiled and from source on every Python (from 3.12
    the built-in sum() of floats is compensated, which a compiled loop is not)."""
    total = 0.0
    for value in values:
        total += value
    return total


def parse_query(text: str) -> Query:
    """The Query of a trigger's PromQL, or UnknownQuery naming what is not understood."""
    compact = " ".join(text.split())
    if compact.startswith(f"sum({HELD_METRIC}{{"):
        return Query("held", "sum", 0.0)
    window = _RANGE.search(compact)
    if window is None:
        raise UnknownQuery(f"no [range] in {compact!r}")
    seconds = float(window.group(1)) * _UNIT[window.group(2)]
    if "avg_over_time(" not in compact:
        raise UnknownQuery(f"not an avg_over_time query: {compact!r}")
    aggregate: Aggregate
    if compact.startswith("sum("):
        aggregate = "sum"
    elif compact.startswith("avg(") or compact.startswith("(avg("):
        aggregate = "avg"
    else:
        raise UnknownQuery(f"neither sum(...) nor avg(...): {compact!r}")
    series: Series
    if "vllm:num_requests_waiting" in compact:
        series = "waiting"
    elif "vllm:num_requests_running" in compact:
        series = "running"
    elif "kv_cache_usage_perc" in compact or "gpu_cache_usage_perc" in compact:
        series = "kv"
    else:
        raise UnknownQuery(f"no vLLM series the twin models in {compact!r}")
    slots = _SLOTS.search(compact)
    return Query(series, aggregate, seconds, float(slots.group(1)) if slots else 1.0)


@dataclass(frozen=True)
class Trigger:
    name: str
    query: Query
    metric_type: Literal["AverageValue", "Value"]
    threshold: float
    activation_threshold: float = 0.0

    def replicas(self, current: int, ready: int, value: float) -> int:
        """The HPA's recommendation from this trigger's metric value."""
        if self.metric_type == "AverageValue":
            return average_value_replicas(current, value, self.threshold)
        # A Value target: ceil(ratio x ready pods), unchanged within the tolerance (replica_calculator.go).
        if current == 0 or ratio_replicas(current, value, self.threshold) == current:
            return current
        return ratio_replicas(max(ready, 1), value, self.threshold, tolerance=0.0)

    def active(self, value: float) -> bool:
        return value > self.activation_threshold


@dataclass(frozen=True)
class ScaledObject:
    """What the ScaledObject (and the HPA KEDA makes of it) decides with."""

    min_replicas: int  # minReplicaCount
    max_replicas: int  # maxReplicaCount
    polling_seconds: float  # pollingInterval
    cooldown_seconds: float  # cooldownPeriod
    triggers: tuple[Trigger, ...]
    behavior: Behavior
    idle_replicas: int | None = None  # idleReplicaCount

    @property
    def hpa_min(self) -> int:
        return max(1, self.min_replicas)

    @property
    def scales_to_zero(self) -> bool:
        return self.min_replicas == 0 or self.idle_replicas == 0


def activation(
    scaled: ScaledObject, now: float, replicas: int, values: list[float], last_active: float
) -> tuple[int | None, float]:
    """KEDA's own step at a polling tick: the replicas it sets (None: leave them to the HPA) and the time a
    trigger was last active."""
    if any(t.active(v) for t, v in zip(scaled.triggers, values, strict=True)):
        last_active = now
        if replicas == 0:
            return scaled.hpa_min, last_active
        return None, last_active
    if scaled.scales_to_zero and replicas > 0 and now - last_active >= scaled.cooldown_seconds:
        return scaled.idle_replicas if scaled.idle_replicas is not None else 0, last_active
    return None, last_active
