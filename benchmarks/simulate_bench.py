"""Benchmark (not a test): the serving twin's speed, a day of diurnal traffic at 50 requests/s (issue 21).

    python benchmarks/simulate_bench.py [--rate 50] [--hours 24] [--baseline DIR] [--tree LABEL=DIR]...
        [--engines compiled,python] [--rounds N] [--out RESULTS.md]

The model is serving-demo's mistral-7b, its replicas and g5 node group allowed to 40 so that the fleet can
carry the load (`-c mlinfra:serving.models[1].maxReplicas=40 -c mlinfra:serving.nodePools.g5.maxSize=40`);
the settings come from that offline preview, as `python -m infra simulate` reads them. Drawing the trace and
running the twin are timed apart, in wall-clock and in CPU seconds of the process (the CPU figure is the one to
compare on a shared machine). Each measurement runs in a fresh process that imports the project from its
checkout: `--baseline DIR` times another checkout (e.g. a worktree of main) too, alternating with this one for
`--rounds` rounds, so that before and after meet the same machine load; `--tree LABEL=DIR` (repeatable) adds
more checkouts. `--engines compiled,python` times this checkout's twin both ways in turn: compiled by mypyc (it
must be built: `python -m infra.serving.twin.build`) and from its source (MLINFRA_TWIN_PURE=1); the other
checkouts run as they are. Each row names the twin's modules that ran compiled. Figures depend on the machine
and its load, which are written down with them. `--out` replaces only this benchmark's section of the file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict, cast

from results_file import write_section  # this directory: the script's own

ROOT = Path(__file__).resolve().parents[1]
HEADING = "# Serving twin: a day of diurnal traffic at 50 requests/s"
OVERRIDES = ("mlinfra:serving.models[1].maxReplicas=40", "mlinfra:serving.nodePools.g5.maxSize=40")
TARGET_SECONDS = 10.0  # issue 21: a day at 50 req/s in under 10 s on 2 cores


WHERE_THE_TIME_GOES = (
    "Where the time goes (measured 2026-11-27 on this 2-core shared machine, a day as above; CPU seconds of the "
    "process, so the load shows as slower instructions rather than as time taken by others). From the source, "
    "the draw is random's arithmetic written out (traces._both_lognormal) and about 80% of the run is "
    "Replica.run, a few passes per request of bytecode, boxed floats, heap operations on tuples and histogram "
    "updates; a vectorised numpy draw and bulk histogram binning measured no faster. Compiled by mypyc "
    "(`python -m infra.serving.twin.build`, docs/simulate.md), the same source runs about 1.8 times faster with "
    "the same figures bit for bit: compiling replica.py alone gave most of the run's gain, engine, hpa and keda "
    "little more; traces.py's draw became 2 times faster once math's functions were called through the module "
    "(C calls in mypyc's output). Under perf the compiled run then spent about a fifth in dict lookups of the "
    "step-time cache (one large int key per step, compared by value); keyed by running, then a list by KV, the "
    "run went from 9.0 to 7.2 CPU s. What is left is CPython object work mypyc does not remove: a tuple per heap "
    "entry and per request, boxed floats, the histograms' dict updates and three random.random() calls per "
    "request."
)


class Measured(TypedDict):
    module: str  # the twin's engine.py that ran (proves which checkout was imported)
    compiled: str  # the twin's modules that ran compiled (extensions), "-" for none
    requests: int
    load: float  # 1-minute load average at the start
    draw_wall: float
    draw_cpu: float
    run_wall: float
    run_cpu: float
    figures: str


def measure(root: Path, rate: float, hours: float) -> Measured:
    """Time the draw and the run with the project imported from `root` (a fresh process, PYTHONPATH=root)."""
    os.chdir(root)
    from infra.core.paths import parse_override
    from infra.serving.queueing import Lengths
    from infra.serving.twin import engine, hpa, keda, replica, traces
    from infra.serving.twin.figures import figures
    from infra.serving.twin.traces import Shape, generate
    from infra.tools import preview_json
    from infra.tools.offline.digest import to_digest
    from infra.tools.offline.engine import preview
    from infra.tools.simulate.settings import twins

    result = preview("serving-demo", [parse_override(o) for o in OVERRIDES])
    document = preview_json.parse(to_digest(result), "serving-demo")
    twin = next(t for t in twins(document, 2.0, 0.1, 60.0, 0.0) if t.model == "mistral-7b")
    seconds = hours * 3600
    shape = Shape("diurnal", rate, seconds, Lengths(512, 1536), Lengths(256, 768), twin.perf.max_model_len, 0)
    load = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    trace = list(generate(shape))
    draw_wall, draw_cpu = time.perf_counter() - wall, time.process_time() - cpu
    wall, cpu = time.perf_counter(), time.process_time()
    outcome = engine.simulate(twin, trace, seconds, 0)
    run_wall, run_cpu = time.perf_counter() - wall, time.process_time() - cpu
    f = figures(outcome)
    summary = (
        f"TTFT p50/p95/p99 {f.ttft_ms['p50']} / {f.ttft_ms['p95']} / {f.ttft_ms['p99']} ms, TPOT p95 "
        f"{f.tpot_ms['p95']} ms, {f.over_slo_share:.2%} over the SLO or lost, replicas max {f.replicas_max} (mean "
        f"{f.replicas_mean:.1f}), {sum(f.node_hours.values()):,.1f} node hours, "
        + ("no price" if f.cost_usd is None else f"${f.cost_usd:,.2f}")
    )
    modules = (hpa, keda, replica, engine, traces)
    compiled = [m.__name__.rsplit(".", 1)[1] for m in modules if not (m.__file__ or "").endswith(".py")]
    return Measured(
        module=engine.__file__, compiled=",".join(compiled) or "-", requests=len(trace), load=load,
        draw_wall=draw_wall, draw_cpu=draw_cpu, run_wall=run_wall, run_cpu=run_cpu, figures=summary,
    )  # fmt: skip


def _timed(root: Path, rate: float, hours: float, engine: str) -> Measured:
    env = {k: v for k, v in os.environ.items() if k != "MLINFRA_TWIN_PURE"}
    if engine == "python":
        env["MLINFRA_TWIN_PURE"] = "1"
    done = subprocess.run(
        [sys.executable, __file__, "--measure", str(root), "--rate", str(rate), "--hours", str(hours)],
        capture_output=True, text=True, check=True, env={**env, "PYTHONPATH": str(root)},
    )  # fmt: skip
    measured = cast(Measured, json.loads(done.stdout.strip().splitlines()[-1]))
    if not measured["module"].startswith(str(root)):
        raise SystemExit(f"{root}: imported {measured['module']}, not that checkout's twin")
    if engine == "python" and measured["compiled"] != "-":
        raise SystemExit(f"{root}: MLINFRA_TWIN_PURE=1 still ran {measured['compiled']} compiled")
    if engine == "compiled" and measured["compiled"] == "-":
        raise SystemExit(f"{root}: nothing ran compiled: python -m infra.serving.twin.build there first")
    return measured


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=50.0, help="mean requests per second (default 50)")
    parser.add_argument("--hours", type=float, default=24.0, help="trace length (default 24)")
    parser.add_argument("--baseline", type=Path, help="another checkout to time as well, alternating")
    parser.add_argument("--baseline-label", default="BASELINE", help="how the section names the baseline")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of (baseline, this checkout) (default 1)")
    parser.add_argument(
        "--tree", action="append", default=[], metavar="LABEL=DIR", help="another checkout to time (repeatable)"
    )
    parser.add_argument(
        "--engines", default="as-built", help="compiled,python: time this checkout both ways (default: as built)"
    )
    parser.add_argument("--out", type=Path, help="write the section into this markdown file")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # one measurement, as JSON (internal)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure.resolve(), args.rate, args.hours)))
        return 0
    trees = [("before", args.baseline.resolve()), ("after", ROOT)] if args.baseline else [("this", ROOT)]
    for text in args.tree:
        label, _, directory = text.partition("=")
        trees.insert(len(trees) - 1, (label, Path(directory).resolve()))
    engines = args.engines.split(",")
    if any(e not in ("as-built", "compiled", "python") for e in engines):
        parser.error("--engines: a comma-separated list of compiled, python")
    runs = [
        (f"{name}/{e}" if e != "as-built" else name, tree, e if tree == ROOT else "as-built")
        for name, tree in trees
        for e in (engines if tree == ROOT else ["as-built"])
    ]
    rows: list[tuple[int, str, Measured]] = []
    for round_ in range(1, args.rounds + 1):
        for name, tree, engine in runs:
            rows.append((round_, name, _timed(tree, args.rate, args.hours, engine)))
            print(f"round {round_} {name}: {rows[-1][2]}", file=sys.stderr)
    trees = [(name, tree) for name, tree, _ in runs]
    text = section(args, trees, rows)
    print(text)
    if args.out:
        write_section(args.out, HEADING, text)
    return 0


def section(args: argparse.Namespace, trees: list[tuple[str, Path]], rows: list[tuple[int, str, Measured]]) -> str:
    n = rows[0][2]["requests"]
    lines = [
        HEADING,
        "",
        "`python benchmarks/simulate_bench.py"
        + (" --baseline BASELINE" if args.baseline else "")
        + "".join(f" --tree {t}" for t in args.tree)
        + (f" --engines {args.engines}" if args.engines != "as-built" else "")
        + f" --rounds {args.rounds}"
        + f"` on {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs (a shared "
        "machine: the load average at each measurement's start is in the table). serving-demo's mistral-7b "
        f"(maxReplicas and the g5 group's maxSize set to 40), a diurnal trace at {args.rate:g} req/s mean over "
        f"{args.hours:g} h, seed 0, {n:,} requests. Each row is a fresh process"
        + (f", before ({args.baseline_label}) and after (this checkout) alternating." if args.baseline else "."),
        "",
        "| round | checkout | compiled | load (1 min) | draw CPU (s) | run CPU (s) | total CPU (s) | total wall (s) | "
        "CPU per request (us) |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for round_, name, m in rows:
        draw, run, wall = m["draw_cpu"], m["run_cpu"], m["draw_wall"] + m["run_wall"]
        lines.append(
            f"| {round_} | {name} | {m['compiled']} | {m['load']:.1f} | {draw:.2f} | {run:.2f} | {draw + run:.2f} | "
            f"{wall:.2f} | {(draw + run) / n * 1e6:.2f} |"
        )
    lines += ["", *ratios(trees, rows), ""]
    for name, _ in trees:
        shown = {m["figures"] for _, tree_name, m in rows if tree_name == name}
        lines.append(f"Figures ({name}): " + "; ".join(sorted(shown)) + ".")
    ours = [name for name, tree in trees if tree == ROOT]
    bests = {name: min(m["draw_cpu"] + m["run_cpu"] for _, n, m in rows if n == name) for name in ours}
    best = min(bests.values())
    day = args.rate == 50 and args.hours == 24
    lines += [
        "",
        "Best total of this checkout: "
        + ", ".join(f"{v:.2f} CPU s ({k})" for k, v in bests.items())
        + f"; issue 21 asks for under {TARGET_SECONDS:g} s "
        + (("(met here)." if best < TARGET_SECONDS else "(not met here).") if day else "for a day at 50 req/s."),
        "",
        WHERE_THE_TIME_GOES,
    ]
    return "\n".join(lines) + "\n"


def ratios(trees: list[tuple[str, Path]], rows: list[tuple[int, str, Measured]]) -> list[str]:
    """Each checkout's median draw, run and total CPU seconds and wall, as a ratio to the first's."""

    def median(values: list[float]) -> float:
        ordered = sorted(values)
        middle = len(ordered) // 2
        return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2

    keys: list[tuple[str, Callable[[Measured], float]]] = [
        ("draw CPU", lambda m: m["draw_cpu"]),
        ("run CPU", lambda m: m["run_cpu"]),
        ("total CPU", lambda m: m["draw_cpu"] + m["run_cpu"]),
        ("total wall", lambda m: m["draw_wall"] + m["run_wall"]),
    ]
    medians = {name: [median([key(m) for _, n, m in rows if n == name]) for _, key in keys] for name, _ in trees}
    first = medians[trees[0][0]]
    lines = [
        f"Medians over the rounds (s), and as a share of {trees[0][0]}'s:",
        "",
        "| checkout | " + " | ".join(k for k, _ in keys) + " |",
        "|---|" + "---:|" * len(keys),
    ]
    for name, _ in trees:
        cells = [f"{v:.2f} ({v / f:.2f}x)" if f else f"{v:.2f}" for v, f in zip(medians[name], first, strict=True)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


if __name__ == "__main__":
    sys.exit(main())
