"""The twin's headline figures for the PR report: each model of a serving stack under a short, fixed trace
(steady REPORT_RATE requests/s for REPORT_HOURS, seed 0), so the comment shows what a change does to latency and
cost (docs/simulate.md). Deterministic: the same code and config give the same lines."""

from __future__ import annotations

from typing import Any

from infra.core.errors import InputError
from infra.providers import tokens
from infra.serving import startup
from infra.serving.queueing import Lengths
from infra.serving.twin.engine import simulate
from infra.serving.twin.figures import Figures, figures
from infra.serving.twin.traces import Shape, generate
from infra.tools import preview_json

REPORT_RATE, REPORT_HOURS, REPORT_SEED = 2.0, 1.0, 0
# The hour starts on a Monday at noon in a schedule's time zone: a model with office-hours minimums is measured as
# it serves, not in its night at zero (`python -m infra simulate --trace office` plays a whole day).
REPORT_WEEK_START = 12 * 3600.0
REPORT_PROMPT, REPORT_OUTPUT = Lengths(512, 1536), Lengths(256, 768)
TIMEOUT = 60.0


def headline(document: preview_json.PreviewDocument) -> list[Figures] | str:
    """Each model's figures, or why the stack's models cannot be simulated."""
    from infra.tools.simulate.settings import twins

    try:
        found = twins(document, None, None, TIMEOUT, 0.0, week_start_seconds=REPORT_WEEK_START)  # each own SLO
    except InputError as error:
        return "; ".join(str(p) for p in error.problems)
    seconds = REPORT_HOURS * 3600
    results = []
    for twin in found:
        shape = Shape(
            "steady", REPORT_RATE, seconds, REPORT_PROMPT, REPORT_OUTPUT, twin.perf.max_model_len, REPORT_SEED
        )
        results.append(figures(simulate(twin, generate(shape), seconds, REPORT_SEED)))
    return results


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def markdown(result: list[Figures] | str) -> list[str]:
    out = ["#### Simulation", ""]
    if isinstance(result, str):
        return [*out, f"Not simulated: {result}"]
    if not result:
        return [*out, "No model scaled by a KEDA ScaledObject: nothing to simulate."]
    out += [
        f"The twin (`python -m infra simulate`), steady {REPORT_RATE:g} req/s per model for {REPORT_HOURS:g} h, "
        f"prompts {REPORT_PROMPT.mean:g} (p95 {REPORT_PROMPT.p95:g}) and outputs {REPORT_OUTPUT.mean:g} "
        f"(p95 {REPORT_OUTPUT.p95:g}) tokens, seed {REPORT_SEED}, from Monday 12:00 (a schedule's zone), all of it "
        "under one API key where a front door limits each key (its 429s are lost); each model's SLO "
        "(`models[i].slo`, else TTFT 2000 ms and TPOT 100 ms). Node start-up times are assumptions a real cloud "
        "confirms (docs/simulate.md).",
        "",
        "| model | SLO TTFT / TPOT ms | TTFT p50 / p95 / p99 ms | TPOT p95 ms | over SLO or lost | lost "
        "| replicas max | node hours | cost | $ / M output tokens |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for f in result:
        lost = f.timed_out + f.refused + f.limited + f.killed
        cost = "-" if f.cost_usd is None else f"${f.cost_usd:,.2f}"
        per_m = "-" if f.usd_per_million_tokens is None else f"${f.usd_per_million_tokens:,.2f}"
        out.append(
            f"| `{f.model}` | {_ms(f.slo_ms[0])} / {_ms(f.slo_ms[1])} "
            f"| {_ms(f.ttft_ms['p50'])} / {_ms(f.ttft_ms['p95'])} / {_ms(f.ttft_ms['p99'])} "
            f"| {_ms(f.tpot_ms['p95'])} | {f.over_slo_share:.1%} | {lost:,} of {f.requests:,} | {f.replicas_max} "
            f"| {sum(f.node_hours.values()):,.1f} | {cost} | {per_m} |"
        )
    return out


def startup_lines(document: preview_json.PreviewDocument) -> list[str]:
    """Each model server's start-up budget as its Deployment declares it (startup.STARTUP_ANNOTATION): the
    slowest type that holds a replica, from zero and on a node that holds the image."""
    lines = []
    for resource in document.resources:
        if resource.type != tokens.K8S_DEPLOYMENT:
            continue
        metadata = resource.props.get("metadata") or {}
        value = (metadata.get("annotations") or {}).get(startup.STARTUP_ANNOTATION)
        if value is None:
            continue
        try:
            found = startup.from_annotation(str(value))
        except ValueError as error:
            lines.append(f"- `{metadata.get('name', resource.name)}`: {error}")
            continue
        slow = startup.slowest(found)
        assert slow is not None  # from_annotation refuses an empty budget
        parts = ", ".join(f"{term.name} {term.seconds / 60:.1f}" for term in slow.terms)
        lines.append(
            f"- `{metadata.get('name', resource.name)}`: {slow.from_zero_seconds / 60:.1f} min from zero on "
            f"{slow.instance_type} ({parts}); {slow.on_node_seconds / 60:.1f} min on a node that holds the image"
        )
    if not lines:
        return []
    return ["", "Start-up budgets (minutes; assumptions a real cluster confirms, docs/serving.md):", "", *lines]


# A p95 target allows 5% of requests over it: a model beyond that (served over its SLO, or not served) misses it.
SLO_ALLOWANCE = 0.05


def misses(result: list[Figures] | str) -> list[tuple[str, float]]:
    """The models whose twin hour misses their SLO, each with its share of requests over it or lost."""
    if isinstance(result, str):
        return []
    return [(f.model, f.over_slo_share) for f in result if f.over_slo_share > SLO_ALLOWANCE]


def for_report(document: Any) -> tuple[list[str], list[tuple[str, float]]]:
    """The report's simulation lines, and the models that miss their SLO in it."""
    result = headline(document)
    return markdown(result) + startup_lines(document), misses(result)
