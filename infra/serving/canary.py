"""A canary promotion's plan and its judgement (pure; docs/serving.md "Canary promotions").

A canary sends a growing share of an alias's traffic (its `steps`, in percent, ending at 100) to the new version;
at the end of each step's window it compares the two versions' own figures over that window (the servers'
vllm:time_to_first_token_seconds and vllm:request_time_per_output_token_seconds p95, and the share of requests
that failed) and goes on, rolls back, or waits for more requests. The new version rolls back when it is worse than
the old beyond the margins, or misses the model's SLO. Every step's figures and decision are written to the
canary's state, so a run is logged, and can be resumed from its state alone after an interruption.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

DEFAULT_STEPS = (10, 50, 100)
Decision = Literal["go", "roll back", "wait"]
Status = Literal["running", "promoted", "rolled back"]


def steps_problem(steps: Sequence[int]) -> str | None:
    """Why `steps` are not a canary's percentages (increasing, each 1-100, the last 100), or None."""
    if not steps:
        return "no steps: give percentages of the traffic, increasing, ending at 100 (e.g. 10,50,100)"
    if any(isinstance(s, bool) or not isinstance(s, int) or not 1 <= s <= 100 for s in steps):
        return f"{list(steps)}: each step is a whole percentage from 1 to 100"
    if any(b <= a for a, b in zip(steps, steps[1:], strict=False)):
        return f"{list(steps)}: the steps must increase"
    if steps[-1] != 100:
        return f"{list(steps)}: the last step must be 100 (the new version takes all of the traffic)"
    return None


@dataclass(frozen=True)
class Margins:
    ttft: float = 0.2  # the new version's TTFT p95 may be this share slower than the old's
    tpot: float = 0.2
    errors: float = 0.01  # and its share of failed requests this much higher


@dataclass(frozen=True)
class Plan:
    steps: tuple[int, ...] = DEFAULT_STEPS
    window_seconds: float = 900.0
    margins: Margins = field(default_factory=Margins)
    min_requests: int = 100  # per version in a window, for a p95 to mean anything
    slo: tuple[float, float] | None = None  # TTFT and TPOT p95 targets, seconds


@dataclass(frozen=True)
class Figures:
    """One version's, over a window, as its servers' metrics give them."""

    requests: int
    errors: int
    ttft_p95: float | None  # seconds; None without a completed request
    tpot_p95: float | None

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    reasons: tuple[str, ...]


def _worse(name: str, old: float | None, new: float | None, margin: float) -> str | None:
    if old is None or new is None or new <= old * (1 + margin):
        return None
    return f"{name} p95 {new * 1000:,.0f} ms against the old version's {old * 1000:,.0f} ms (margin {margin:.0%})"


def judge(plan: Plan, old: Figures, new: Figures) -> Verdict:
    """The decision at the end of a step's window."""
    if new.requests < plan.min_requests or old.requests < plan.min_requests:
        return Verdict(
            "wait",
            (f"too few requests in the window ({new.requests} new, {old.requests} old; {plan.min_requests} each)",),
        )
    margins = plan.margins
    reasons = [
        r
        for r in (
            _worse("TTFT", old.ttft_p95, new.ttft_p95, margins.ttft),
            _worse("TPOT", old.tpot_p95, new.tpot_p95, margins.tpot),
        )
        if r
    ]
    if new.error_rate > old.error_rate + margins.errors:
        reasons.append(
            f"{new.error_rate:.2%} of its requests failed against the old version's {old.error_rate:.2%} "
            f"(margin {margins.errors:.2%})"
        )
    if plan.slo is not None:
        for name, value, target in (("TTFT", new.ttft_p95, plan.slo[0]), ("TPOT", new.tpot_p95, plan.slo[1])):
            if value is not None and value > target:
                reasons.append(f"{name} p95 {value * 1000:,.0f} ms misses the SLO ({target * 1000:,.0f} ms)")
    return Verdict("roll back" if reasons else "go", tuple(reasons))


@dataclass(frozen=True)
class State:
    """A canary as it stands: kept beside the alias in the registry, so any process can take it up."""

    model: str
    alias: str
    old_version: str
    new_version: str
    steps: tuple[int, ...]
    step: int = 0  # index into steps
    status: Status = "running"
    log: tuple[dict[str, Any], ...] = ()

    @property
    def share(self) -> int:
        """The new version's percentage of the traffic now (0 once rolled back)."""
        if self.status == "rolled back":
            return 0
        return self.steps[self.step] if self.status == "running" else 100

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "steps": list(self.steps), "log": list(self.log)}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> State:
        raw = json.loads(text)
        return cls(**{**raw, "steps": tuple(raw["steps"]), "log": tuple(raw["log"])})


def advance(plan: Plan, state: State, at: str, old: Figures, new: Figures) -> State:
    """The state after the current step's window ended at `at` with these figures: the next step, promoted, rolled
    back, or the same step waiting for more requests. Each call adds its figures and decision to the log."""
    if state.status != "running":
        return state
    if state.share == 100 and state.log and old.requests == 0:
        # The old version serves nothing at 100%: the new is judged against what the old did in the last window
        # it served.
        old = Figures(**state.log[-1]["old"])
    verdict = judge(plan, old, new)
    entry = {
        "at": at,
        "share": state.share,
        "decision": verdict.decision,
        "reasons": list(verdict.reasons),
        "old": asdict(old),
        "new": asdict(new),
    }
    log = (*state.log, entry)
    if verdict.decision == "wait":
        return replace(state, log=log)
    if verdict.decision == "roll back":
        return replace(state, status="rolled back", log=log)
    if state.step + 1 == len(state.steps):
        return replace(state, status="promoted", log=log)
    return replace(state, step=state.step + 1, log=log)
