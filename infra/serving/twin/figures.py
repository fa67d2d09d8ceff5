"""The twin's headline figures from an Outcome (pure): latency percentiles, SLO share, losses, nodes and cost."""

from __future__ import annotations

from dataclasses import dataclass

from infra.serving.twin.engine import Outcome


def percentile(histogram: dict[int, int], share: float, unit: float) -> float | None:
    """The `share` quantile of a histogram of bins of `unit` seconds (the bin's upper edge); None when empty."""
    total = sum(histogram.values())
    if total == 0:
        return None
    rank = share * total
    seen = 0
    for key in sorted(histogram):
        seen += histogram[key]
        if seen >= rank:
            return (key + 1) * unit
    return (max(histogram) + 1) * unit


@dataclass(frozen=True)
class Figures:
    model: str
    seconds: float
    requests: int
    completed: int
    timed_out: int
    refused: int
    limited: int  # 429 from the gateway's per-key limits
    killed: int
    held: int  # held at the front door while no replica served
    held_out: int  # of the refused: held the whole hold, then 503 with Retry-After
    over_slo_share: float  # of all requests: completed over a target, or not served at all
    slo_ms: tuple[float, float]  # the targets of that share: TTFT p95, TPOT p95
    ttft_ms: dict[str, float | None]  # p50, p95, p99
    tpot_ms: dict[str, float | None]
    output_tokens: int
    node_hours: dict[str, float]
    cost_usd: float | None
    usd_per_million_tokens: float | None
    replicas_max: int
    replicas_mean: float
    nodes_max: int
    scale_changes: int
    direction_changes: int

    def as_json(self) -> dict[str, object]:
        return {
            "model": self.model,
            "seconds": self.seconds,
            "requests": self.requests,
            "completed": self.completed,
            "timedOut": self.timed_out,
            "refused": self.refused,
            "rateLimited": self.limited,
            "killedMidRequest": self.killed,
            "held": self.held,
            "heldThen503": self.held_out,
            "overSloShare": round(self.over_slo_share, 6),
            "sloMs": {"ttft": self.slo_ms[0], "tpot": self.slo_ms[1]},
            "ttftMs": self.ttft_ms,
            "tpotMs": self.tpot_ms,
            "outputTokens": self.output_tokens,
            "nodeHours": {k: round(v, 4) for k, v in sorted(self.node_hours.items())},
            "costUsd": None if self.cost_usd is None else round(self.cost_usd, 4),
            "usdPerMillionOutputTokens": None
            if self.usd_per_million_tokens is None
            else round(self.usd_per_million_tokens, 4),
            "replicas": {"max": self.replicas_max, "mean": round(self.replicas_mean, 3)},
            "nodesMax": self.nodes_max,
            "scaleChanges": self.scale_changes,
            "directionChanges": self.direction_changes,
        }


def figures(outcome: Outcome) -> Figures:
    tally = outcome.tally
    shares = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
    ttft = {k: _ms(percentile(tally.ttft_ms, q, 0.001)) for k, q in shares.items()}
    tpot = {k: _ms(percentile(tally.tpot_ms10, q, 0.0001)) for k, q in shares.items()}
    lost = tally.timed_out + tally.refused + tally.limited + tally.killed
    series = outcome.series
    cost = outcome.cost
    return Figures(
        model=outcome.twin.model,
        seconds=outcome.seconds,
        requests=tally.arrived,
        completed=tally.completed,
        timed_out=tally.timed_out,
        refused=tally.refused,
        limited=tally.limited,
        killed=tally.killed,
        held=tally.held,
        held_out=tally.held_out,
        over_slo_share=(tally.over_slo + lost) / tally.arrived if tally.arrived else 0.0,
        slo_ms=(outcome.twin.ttft_slo_seconds * 1000, outcome.twin.tpot_slo_seconds * 1000),
        ttft_ms=ttft,
        tpot_ms=tpot,
        output_tokens=tally.output_tokens,
        node_hours={k: v / 3600 for k, v in outcome.node_seconds.items()},
        cost_usd=cost,
        usd_per_million_tokens=cost / tally.output_tokens * 1e6 if cost is not None and tally.output_tokens else None,
        replicas_max=max((s[2] for s in series), default=0),
        replicas_mean=sum(s[2] for s in series) / len(series) if series else 0.0,
        nodes_max=max((s[3] for s in series), default=0),
        scale_changes=outcome.scale_changes,
        direction_changes=outcome.direction_changes,
    )


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)
