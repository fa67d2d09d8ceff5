"""A canary promotion in the twin (docs/simulate.md "Canaries"): the old configuration against a new one, step by
step, judged as a promotion judges them (infra/serving/canary.py).

Each step's window of the trace is split at the front door by the step's share, request by request (weighted
backends: no endpoint picker across the two versions), and each version runs its share on its own twin, starting
with its share of the replicas the old one serves with (at least one) and scaled by its own autoscaler. A
version's figures are its window's: requests, those not served (timed out, refused, killed, limited), and TTFT and
TPOT p95. The canary then goes on, waits or rolls back, and ends there: the old version keeps the alias.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace

from infra.serving import canary
from infra.serving.twin.engine import simulate
from infra.serving.twin.figures import figures
from infra.serving.twin.settings import Twin


@dataclass(frozen=True)
class Step:
    share: int
    start: float
    old: canary.Figures
    new: canary.Figures
    decision: canary.Decision
    reasons: tuple[str, ...]


def _figures(twin: Twin, requests: list[tuple[float, int, int]], seconds: float, seed: int) -> canary.Figures:
    f = figures(simulate(twin, requests, seconds, seed))
    ttft, tpot = f.ttft_ms["p95"], f.tpot_ms["p95"]
    return canary.Figures(
        f.requests,
        f.timed_out + f.refused + f.killed + f.limited,
        None if ttft is None else ttft / 1000,
        None if tpot is None else tpot / 1000,
    )


def run_canary(
    old: Twin, new: Twin, trace: list[tuple[float, int, int]], plan: canary.Plan, seed: int = 0
) -> tuple[canary.State, list[Step]]:
    """The canary over `trace` (seconds from its start), one window per step, until it is promoted or rolled back
    or the trace ends."""
    state = canary.State(old.model, "-", "old", "new", plan.steps)
    rng = random.Random(seed ^ 0xCA9A)
    replicas = old.initial_replicas if old.initial_replicas is not None else old.scaled.hpa_min
    steps: list[Step] = []
    window = plan.window_seconds
    start = 0.0
    while state.status == "running" and start < (trace[-1][0] if trace else 0.0):
        share = state.share
        in_window = [(t - start, p, o) for t, p, o in trace if start <= t < start + window]
        to_new: list[tuple[float, int, int]] = []
        to_old: list[tuple[float, int, int]] = []
        for request in in_window:
            (to_new if rng.random() * 100 < share else to_old).append(request)
        canary_replicas = max(1, math.ceil(replicas * share / 100))
        kept = max(1, math.ceil(replicas * (100 - share) / 100))
        old_twin = replace(old, routing="random", initial_replicas=kept)
        new_twin = replace(new, routing="random", initial_replicas=canary_replicas)
        old_f = _figures(old_twin, to_old, window, seed)
        new_f = _figures(new_twin, to_new, window, seed)
        state = canary.advance(plan, state, f"+{start + window:.0f}s", old_f, new_f)
        entry = state.log[-1]  # its `old` is what the new was judged against (at 100%, the last window's)
        judged_against = canary.Figures(**entry["old"])
        steps.append(Step(share, start, judged_against, new_f, entry["decision"], tuple(entry["reasons"])))
        start += window
    return state, steps


def lines(state: canary.State, steps: list[Step]) -> list[str]:
    def version(f: canary.Figures) -> str:
        ttft = "-" if f.ttft_p95 is None else f"{f.ttft_p95 * 1000:,.0f}"
        tpot = "-" if f.tpot_p95 is None else f"{f.tpot_p95 * 1000:,.0f}"
        return f"{f.requests:,} requests, {f.errors:,} not served, TTFT p95 {ttft} ms, TPOT p95 {tpot} ms"

    out = [f"{state.model}: canary of the new configuration"]
    for step in steps:
        out.append(f"  {step.share}% from {step.start / 60:.0f} min: new {version(step.new)}; old {version(step.old)}")
        out.append(f"    -> {step.decision}" + (": " + "; ".join(step.reasons) if step.reasons else ""))
    out.append(f"  {state.status}")
    return out
