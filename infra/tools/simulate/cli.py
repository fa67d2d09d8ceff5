"""`python -m infra simulate`: the serving fleet's twin run under a trace (docs/simulate.md).

Settings come from the stack's offline preview (or a preview document), the trace from a built-in shape or a
request log; the figures are printed (or --json), the replicas and nodes over time written as an SVG where
--picture says (nothing is written without it, so a run leaves no file in the work tree). --compare
runs the same trace through another configuration (a preview document, e.g. the main branch's, or -c overrides)
and prints both and the change. The last line (or --json's "engine") says whether the twin ran compiled or from
its source (infra/serving/twin/accel.py).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from infra.core.bounds import positive_within
from infra.core.errors import InputError, Problem
from infra.serving import canary, schedule
from infra.serving.queueing import Lengths
from infra.serving.spec import MAX_SLO_MS
from infra.serving.twin import accel
from infra.serving.twin.engine import Outcome, simulate
from infra.serving.twin.figures import Figures, figures
from infra.serving.twin.picture import svg
from infra.serving.twin.settings import Twin
from infra.serving.twin.traces import SHAPES, Shape, TraceError, generate, load_log

DEFAULT_RATE = 2.0
DEFAULT_PROMPT, DEFAULT_OUTPUT = "512:1536", "256:768"


def add_simulate_parser(verbs: Any) -> None:
    sim = verbs.add_parser(
        "simulate",
        help="run a serving stack's twin (autoscalers, nodes, batching) under a trace: latency, losses, cost",
        description="A deterministic simulation of each model of a serving stack as its preview declares it "
        "(docs/simulate.md).",
    )
    source = sim.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack", "-s", help="stack name: stacks/Pulumi.<stack>.yaml (its offline preview)")
    source.add_argument("--preview-json", type=Path, metavar="PATH", help="a `pulumi preview --json` document")
    sim.add_argument("-c", "--config", action="append", default=[], metavar="KEY=VALUE", help="as `preview -c`")
    sim.add_argument(
        "--trace", default="diurnal", metavar="SHAPE|PATH",
        help=f"{', '.join(SHAPES)} (default diurnal), or a request log: CSV or JSON lines with timestamp, "
        "prompt_tokens, output_tokens",
    )  # fmt: skip
    sim.add_argument("--rate", type=float, default=DEFAULT_RATE, help="a shape's mean requests/s per model (2)")
    sim.add_argument("--hours", type=float, help="a shape's length in hours (default 24; a log: its own length)")
    sim.add_argument("--seed", type=int, default=0, help="the shape's and the router's seed (default 0)")
    sim.add_argument(
        "--start", default="mon-00:00", metavar="DAY-HH:MM",
        help="where in the week the trace starts, in a schedule's time zone (default mon-00:00): what a model's "
        "schedule asks for then, and when its windows open",
    )  # fmt: skip
    sim.add_argument("--prompt-tokens", default=DEFAULT_PROMPT, metavar="MEAN:P95", help="a shape's prompts")
    sim.add_argument("--output-tokens", default=DEFAULT_OUTPUT, metavar="MEAN:P95", help="a shape's outputs")
    sim.add_argument(
        "--ttft-slo-ms", type=float,
        help="TTFT target of the SLO share (default: the model's slo.ttftP95Ms, else 2000)",
    )  # fmt: skip
    sim.add_argument(
        "--tpot-slo-ms", type=float,
        help="TPOT target of the SLO share (default: the model's slo.tpotP95Ms, else 100)",
    )  # fmt: skip
    sim.add_argument("--timeout-s", type=float, default=60.0, help="a client gives up unstarted requests (60)")
    sim.add_argument(
        "--spot-interruptions-per-node-hour", type=float, default=0.0, help="Spot reclaims per node-hour (0)"
    )
    sim.add_argument(
        "--callers", type=int, default=1,
        help="API keys the traffic comes from, evenly: the front door's limits count per key (default 1)",
    )  # fmt: skip
    sim.add_argument("--model", action="append", default=[], help="simulate only this model (repeatable)")
    sim.add_argument(
        "--picture", type=Path, metavar="PATH",
        help="write the replicas and nodes over time as an SVG here (none is written without it)",
    )  # fmt: skip
    sim.add_argument("--compare", type=Path, metavar="PATH", help="another configuration's preview document")
    sim.add_argument(
        "--compare-config", action="append", default=[], metavar="KEY=VALUE",
        help="another configuration: the stack with these overrides (repeatable)",
    )  # fmt: skip
    sim.add_argument(
        "--canary-config", action="append", default=[], metavar="KEY=VALUE",
        help="run a canary of the stack with these overrides (the new version) against it, step by step (repeatable)",
    )  # fmt: skip
    sim.add_argument(
        "--canary-steps", default="10,50,100", metavar="P,P,...",
        help="the canary's shares of the traffic, percent, increasing to 100 (default 10,50,100)",
    )  # fmt: skip
    sim.add_argument("--canary-window-s", type=float, default=900.0, help="each canary step's window (900 s)")
    sim.add_argument(
        "--canary-margin", type=float, default=0.2,
        help="how much slower (TTFT and TPOT p95) the new version may be, a share (default 0.2)",
    )  # fmt: skip
    sim.add_argument("--json", action="store_true", help="print a JSON document")
    sim.set_defaults(handler=run)


MAX_TOKENS = 10_000_000  # a shape's token lengths; a model's context cuts them further
MAX_HOURS = 8_784.0  # a leap year
MAX_REQUESTS = 20_000_000  # a shape's requests per model (rate x length): a few minutes of the compiled twin
MAX_TIMEOUT_S = 86_400.0
MAX_SPOT_RATE = 60.0  # reclaims per node-hour: one a minute


def _lengths(flag: str, text: str) -> Lengths:
    mean, _, p95 = text.partition(":")
    wrong = Problem(flag, f"{text[:40]!r} is not MEAN:P95 tokens with 0 < MEAN <= P95 <= {MAX_TOKENS:,}")
    try:
        low, high = float(mean), float(p95 or mean)
    except ValueError:
        raise InputError(wrong) from None
    if not (math.isfinite(low) and math.isfinite(high) and high <= MAX_TOKENS):
        raise InputError(wrong)
    try:
        return Lengths(low, high)
    except ValueError:
        raise InputError(wrong) from None


def canary_steps(text: str) -> tuple[int, ...]:
    try:
        steps = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ValueError(f"{text[:40]!r}: whole percentages, comma-separated, e.g. 10,50,100") from None
    problem = canary.steps_problem(steps)
    if problem:
        raise ValueError(problem)
    return steps


def canary_problems(args: argparse.Namespace) -> list[Problem]:
    if not args.canary_config:
        return []
    problems = []
    try:
        canary_steps(args.canary_steps)
    except ValueError as error:
        problems.append(Problem("--canary-steps", str(error)))
    if problem := positive_within("--canary-window-s", args.canary_window_s, MAX_TIMEOUT_S):
        problems.append(problem)
    if not (math.isfinite(args.canary_margin) and 0 <= args.canary_margin <= 10):
        problems.append(Problem("--canary-margin", f"{args.canary_margin:g} must be from 0 to 10 (a share)"))
    if args.preview_json:
        problems.append(Problem("--canary-config", "overrides need --stack (a preview document is fixed)"))
    return problems


def week_start(text: str) -> float:
    """Seconds from Monday 00:00 of "DAY-HH:MM" (mon ... sun); ValueError saying what is allowed."""
    day, _, clock = text.partition("-")
    if day not in schedule.DAYS:
        raise ValueError(f"{text[:40]!r} is not DAY-HH:MM with DAY one of {', '.join(schedule.DAYS)}")
    minutes = schedule.clock_minutes(clock)
    if minutes >= 24 * 60:
        raise ValueError(f"{text[:40]!r}: the time of day must be before 24:00")
    return (schedule.DAYS.index(day) * 24 * 60 + minutes) * 60.0


def check_numbers(args: argparse.Namespace) -> None:
    """Every number finite, positive where it must be, and within what the twin can run (before any preview)."""
    bounded = (
        ("--rate", args.rate, float("inf")),
        ("--ttft-slo-ms", args.ttft_slo_ms, MAX_SLO_MS),
        ("--tpot-slo-ms", args.tpot_slo_ms, MAX_SLO_MS),
        ("--timeout-s", args.timeout_s, MAX_TIMEOUT_S),
        ("--hours", args.hours, MAX_HOURS),
    )
    problems = [p for flag, value, most in bounded if value is not None and (p := positive_within(flag, value, most))]
    if not problems and args.trace in SHAPES and args.rate * (args.hours or 24.0) * 3600 > MAX_REQUESTS:
        problems.append(
            Problem(
                "--rate",
                f"{args.rate:g} requests/s for {args.hours or 24.0:g} h is "
                f"{args.rate * (args.hours or 24.0) * 3600:,.0f} requests per model; the twin runs at most "
                f"{MAX_REQUESTS:,} (lower --rate or --hours)",
            )
        )
    for flag, text in (("--prompt-tokens", args.prompt_tokens), ("--output-tokens", args.output_tokens)):
        try:
            _lengths(flag, text)
        except InputError as error:
            problems += error.problems
    if args.compare_config and args.preview_json:
        problems.append(
            Problem("--compare-config", "overrides need --stack (a preview document is fixed); use --compare")
        )
    problems += canary_problems(args)
    try:
        week_start(args.start)
    except ValueError as error:
        problems.append(Problem("--start", str(error)))
    if not 1 <= args.callers <= 100_000:
        problems.append(Problem("--callers", f"{args.callers} must be between 1 and 100000"))
    spot = args.spot_interruptions_per_node_hour
    if not (math.isfinite(spot) and 0 <= spot <= MAX_SPOT_RATE):
        problems.append(Problem("--spot-interruptions-per-node-hour", f"{spot:g} must be from 0 to {MAX_SPOT_RATE:g}"))
    if args.picture is not None:
        if args.picture.is_dir():
            problems.append(Problem("--picture", f"{str(args.picture)!r} is a directory; name the SVG file to write"))
        elif not args.picture.parent.is_dir():
            problems.append(Problem("--picture", f"directory {str(args.picture.parent)!r} does not exist"))
    if problems:
        raise InputError(problems)


def document_twins(args: argparse.Namespace, overrides: list[tuple[str, str]], path: Path | None) -> list[Twin]:
    """The twins of the stack's preview (with `overrides`) or of the preview document at `path`."""
    from infra.tools import preview_json
    from infra.tools.simulate.settings import twins

    if path is not None:
        document = preview_json.load(path)
    else:
        from infra.tools.offline.digest import to_digest
        from infra.tools.offline.engine import preview

        result = preview(args.stack, overrides)
        if result.errors:
            raise InputError(Problem(f"--stack {args.stack}", "the preview has errors: run `python -m infra preview`"))
        document = preview_json.parse(to_digest(result), f"offline preview of {args.stack}")
    found = twins(
        document,
        None if args.ttft_slo_ms is None else args.ttft_slo_ms / 1000,
        None if args.tpot_slo_ms is None else args.tpot_slo_ms / 1000,
        args.timeout_s,
        args.spot_interruptions_per_node_hour,
        args.callers,
        week_start(args.start),
    )
    if args.model:
        unknown = sorted(set(args.model) - {t.model for t in found})
        if unknown:
            known = ", ".join(t.model for t in found) or "none"
            raise InputError(Problem("--model", f"{', '.join(unknown)} not in the preview; its models: {known}"))
        found = [t for t in found if t.model in args.model]
    if not found:
        raise InputError(
            Problem("--stack", "no model scaled by a KEDA ScaledObject in the preview: not a serving stack")
        )
    return found


def trace_for(twin: Twin, args: argparse.Namespace) -> tuple[Iterable[tuple[float, int, int]], float]:
    """The requests of `args`'s trace for `twin` (a shape is cut to its context) and the seconds it runs."""
    if args.trace not in SHAPES:
        try:
            log = load_log(Path(args.trace))
        except TraceError as error:
            raise InputError(Problem("--trace", str(error))) from None
        return log, args.hours * 3600 if args.hours else log[-1][0] + 1
    prompt, output = _lengths("--prompt-tokens", args.prompt_tokens), _lengths("--output-tokens", args.output_tokens)
    seconds = (args.hours or 24.0) * 3600
    shape = Shape(args.trace, args.rate, seconds, prompt, output, twin.perf.max_model_len, args.seed)
    return generate(shape), seconds


def run_twins(twins: list[Twin], args: argparse.Namespace) -> list[Outcome]:
    """Each twin under the trace of `args` (the same requests for each, by seed)."""
    outcomes = []
    for twin in twins:
        requests, seconds = trace_for(twin, args)
        outcomes.append(simulate(twin, requests, seconds, args.seed))
    return outcomes


def run_canaries(args: argparse.Namespace, olds: list[Twin], news: list[Twin]) -> int:
    """Each model's canary of the new configuration (`--canary-config`) against the stack, under the trace."""
    from infra.tools.simulate.canary import lines as canary_lines
    from infra.tools.simulate.canary import run_canary

    by_model = {t.model: t for t in news}
    margin = args.canary_margin
    documents, out = [], []
    for old in olds:
        new = by_model[old.model]
        plan = canary.Plan(
            canary_steps(args.canary_steps),
            args.canary_window_s,
            canary.Margins(margin, margin),
            slo=(new.ttft_slo_seconds, new.tpot_slo_seconds),
        )
        trace = list(trace_for(old, args)[0])
        state, steps = run_canary(old, new, trace, plan, args.seed)
        documents.append(json.loads(state.to_json()))
        out += [*canary_lines(state, steps), ""]
    print(json.dumps({"canaries": documents}, indent=2) if args.json else "\n".join(out).rstrip())
    return 0


def _fmt(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:,.1f}{unit}"


def lines(f: Figures) -> list[str]:
    money = "no public price" if f.cost_usd is None else f"${f.cost_usd:,.2f}"
    per_m = "-" if f.usd_per_million_tokens is None else f"${f.usd_per_million_tokens:,.3f}"
    return [
        f"{f.model}: {f.requests:,} requests over {f.seconds / 3600:g} h",
        f"  completed {f.completed:,}, timed out {f.timed_out:,}, refused {f.refused:,}, "
        f"rate-limited (429) {f.limited:,}, killed mid-request {f.killed:,}",
        *(
            [f"  held at the front door while no replica served {f.held:,}, of which answered 503 after the hold "
             f"{f.held_out:,}"]
            if f.held else []
        ),
        f"  TTFT p50/p95/p99: {_fmt(f.ttft_ms['p50'])} / {_fmt(f.ttft_ms['p95'])} / {_fmt(f.ttft_ms['p99'])} ms",
        f"  TPOT p50/p95/p99: {_fmt(f.tpot_ms['p50'])} / {_fmt(f.tpot_ms['p95'])} / {_fmt(f.tpot_ms['p99'])} ms",
        f"  over the SLO (TTFT {_fmt(f.slo_ms[0])} ms, TPOT {_fmt(f.slo_ms[1])} ms) or not served: "
        f"{f.over_slo_share:.2%}",
        f"  replicas mean {f.replicas_mean:.2f}, max {f.replicas_max}; nodes max {f.nodes_max}; "
        f"{f.scale_changes} scale changes ({f.direction_changes} reversals)",
        "  node hours: " + ", ".join(f"{k} {v:,.2f}" for k, v in sorted(f.node_hours.items()))
        + f"; cost {money}; per million output tokens {per_m}",
    ]  # fmt: skip


def comparison(base: Figures, other: Figures) -> str:
    """One line: the other configuration's figures -> this one's."""

    def change(a: float | None, b: float | None, unit: str) -> str:
        return f"{_fmt(a, unit)} -> {_fmt(b, unit)}"

    def money(value: float | None) -> str:
        return "-" if value is None else f"${value:,.2f}"

    return (
        f"{base.model}: p95 TTFT {change(other.ttft_ms['p95'], base.ttft_ms['p95'], ' ms')}, p95 TPOT "
        f"{change(other.tpot_ms['p95'], base.tpot_ms['p95'], ' ms')}, over the SLO or lost "
        f"{other.over_slo_share:.2%} -> {base.over_slo_share:.2%}, cost {money(other.cost_usd)} -> "
        f"{money(base.cost_usd)}, per million output tokens {money(other.usd_per_million_tokens)} -> "
        f"{money(base.usd_per_million_tokens)}"
    )


def run(args: argparse.Namespace) -> int:
    from infra.core.paths import parse_override

    check_numbers(args)
    overrides = [parse_override(text) for text in args.config]
    twins = document_twins(args, overrides, args.preview_json)
    other_twins = None
    if args.compare or args.compare_config:
        other = [*overrides, *(parse_override(text) for text in args.compare_config)]
        other_twins = document_twins(args, other, args.compare)
    if args.canary_config:
        return run_canaries(
            args, twins, document_twins(args, [*overrides, *map(parse_override, args.canary_config)], None)
        )
    outcomes = run_twins(twins, args)
    results = [figures(o) for o in outcomes]
    others = [figures(o) for o in run_twins(other_twins, args)] if other_twins else []
    name = args.stack or args.preview_json.stem
    trace = args.trace if args.trace in SHAPES else Path(args.trace).name
    picture: Path | None = args.picture
    if picture is not None:
        picture.write_text(svg(outcomes, f"{name}: {trace} trace, seed {args.seed}"), encoding="utf-8")
    by_model = {f.model: f for f in others}
    if args.json:
        doc: dict[str, Any] = {
            "stack": name,
            "trace": trace,
            "seed": args.seed,
            "models": [f.as_json() for f in results],
        }
        if others:
            doc["compare"] = [f.as_json() for f in others]
        doc["engine"] = accel.ENGINE
        if picture is not None:
            doc["picture"] = str(picture)
        print(json.dumps(doc, indent=2))
        return 0
    out = []
    for f in results:
        out += [*lines(f), ""]
    if others:
        out.append("compared with the other configuration (other -> this):")
        out += [comparison(f, by_model[f.model]) for f in results if f.model in by_model]
        out.append("")
    if picture is not None:
        out.append(f"picture: {picture}")
    out.append(f"twin: {accel.describe()}")
    print("\n".join(out))
    return 0
