"""Benchmark (not a test): offline policy runner throughput on a generated preview.

    python benchmarks/policy_bench.py [--resources 10000] [--repeat 3] [--out benchmarks/RESULTS.md]

The preview is copies of a compliant training run (launch template with five interfaces, fleet,
Lustre, security groups and rules, ...) under distinct names, so every rule has work to do. A run is
what `python -m infra policy --preview-json` does after reading the file: start the pack, configure
it, Analyze every resource, AnalyzeStack once. With --out, that section of the file is replaced (the
others are kept).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from dataclasses import replace
from pathlib import Path

from results_file import write_section  # this directory: the script's own

ROOT = Path(__file__).resolve().parents[1]

MARKER = "# Policy runner benchmark"


def generated_document(count: int) -> dict:
    from tests.policies.policy_fixtures import to_document, training_resources

    template = training_resources()
    resources = []
    copy = 0
    while len(resources) < count:
        renamed = {r.urn: r.urn + f"-{copy}" for r in template}
        for r in template:
            resources.append(
                replace(
                    r,
                    urn=renamed[r.urn],
                    name=f"{r.name}-{copy}",
                    dependencies=tuple(renamed.get(u, u) for u in r.dependencies),
                    property_dependencies={
                        k: tuple(renamed.get(u, u) for u in v) for k, v in r.property_dependencies.items()
                    },
                )
            )
        copy += 1
    return to_document(resources[: count - 1], "training-bench")  # plus the root stack resource


def run_size() -> int:
    """Resources in one copy of the training run."""
    from tests.policies.policy_fixtures import training_resources

    return len(training_resources())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resources", type=int, default=10_000, help="resources in the generated preview")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs (default 3)")
    parser.add_argument("--out", type=Path, help="write the results section into this Markdown file")
    args = parser.parse_args()
    if args.resources < 2 or args.repeat < 1:
        parser.error("--resources must be at least 2 and --repeat at least 1")

    from infra.tools import preview_json
    from infra.tools.policy_runner import runner

    document = preview_json.parse(generated_document(args.resources))
    times, violations = [], None
    for _ in range(args.repeat):
        started = time.perf_counter()
        result = runner.run(document)
        times.append(time.perf_counter() - started)
        violations = sorted({v.policy for v in result.violations})
    n = len(document.resources)
    best, median = min(times), statistics.median(times)
    lines = [
        MARKER,
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}. Command: `python benchmarks/policy_bench.py --resources "
        f"{args.resources} --repeat {args.repeat}`.",
        f"A generated preview of copies of a compliant training run; each run starts the pack, Analyzes every "
        f"resource over gRPC and AnalyzeStacks once ({len(result.pack.policies)} policies). Packing "
        f"{n // run_size()} runs into one stack trips the stack-wide rules "
        f"{', '.join(violations) or 'none'}, which is expected.",
        "",
        "| resources | median run (s) | best run (s) | resources/second (median) |",
        "|---|---|---|---|",
        f"| {n} | {median:.2f} | {best:.2f} | {n / median:,.0f} |",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        write_section(args.out, MARKER, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
