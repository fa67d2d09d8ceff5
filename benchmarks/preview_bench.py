"""Benchmark (not a test): offline preview time and resource count of each demo stack.

    python benchmarks/preview_bench.py [--repeat 5] [--stacks registry ...] [--nodes 1 4 ...]
        [--out benchmarks/RESULTS.md]

The first preview in a process pays for importing the provider SDKs; it is reported apart from the
warm runs. The node sweep previews `training-demo` with `-c mlinfra:training.nodeCount=N`: resources
must not grow with nodes (one EC2 Fleet launches them all). Figures depend on the machine, which is
written down with them. `--out` replaces only this benchmark's section of the file.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from results_file import write_section  # this directory: the script's own

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="warm runs per stack (default 5)")
    parser.add_argument("--stacks", nargs="*", help="default: every stack in stacks/")
    parser.add_argument(
        "--nodes",
        type=int,
        nargs="*",
        default=[1, 2, 4, 8, 16, 32, 64, 128, 256],
        help="node counts for the training-demo sweep (default 1..256, powers of two)",
    )
    parser.add_argument("--out", type=Path, help="also write the results as Markdown to this file")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    started = time.perf_counter()
    from infra.core.project import load_project
    from infra.tools.offline.engine import preview

    project = load_project()
    import_s = time.perf_counter() - started
    stacks = args.stacks or project.stacks()
    rows = []
    for stack in stacks:
        t0 = time.perf_counter()
        first = preview(stack, project=project)
        cold = time.perf_counter() - t0
        warm = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            preview(stack, project=project)
            warm.append(time.perf_counter() - t0)
        rows.append((stack, len(first.resources()), cold, statistics.median(warm), min(warm)))
        print(
            f"{stack}: {len(first.resources())} resources, first {cold:.3f}s, warm median "
            f"{statistics.median(warm):.3f}s",
            file=sys.stderr,
        )

    sweep = []
    for nodes in args.nodes if "training-demo" in project.stacks() else []:
        override = [("mlinfra:training.nodeCount", str(nodes))]
        result = preview("training-demo", override, project=project)
        if result.errors:
            print(f"training-demo with {nodes} nodes has errors: {result.errors[0].message}", file=sys.stderr)
            return 1
        warm = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            preview("training-demo", override, project=project)
            warm.append(time.perf_counter() - t0)
        sweep.append((nodes, len(result.resources()), statistics.median(warm)))
        print(
            f"training-demo x{nodes}: {len(result.resources())} resources, warm median {statistics.median(warm):.3f}s",
            file=sys.stderr,
        )

    machine = (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )
    lines = [
        "# Offline preview benchmark",
        "",
        f"Machine: {machine}. Command: `python benchmarks/preview_bench.py --repeat {args.repeat}`.",
        f"Importing the engine: {import_s:.2f}s.",
        "",
        "| stack | resources | first run (s) | warm median (s) | warm min (s) |",
        "|---|---|---|---|---|",
    ] + [f"| {s} | {n} | {c:.3f} | {m:.3f} | {lo:.3f} |" for s, n, c, m, lo in rows]
    if sweep:
        lines += [
            "",
            "Training preview against node count (`training-demo`, `-c mlinfra:training.nodeCount=N`):",
            "",
            "| nodes | resources | warm median (s) |",
            "|---|---|---|",
        ]
        lines += [f"| {n} | {r} | {m:.3f} |" for n, r, m in sweep]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        write_section(args.out, lines[0], text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
