"""Benchmark (not a test): this commit against a baseline commit, side by side in one run on one machine.

    python benchmarks/compare.py [--baseline 3faaab4] [--this HEAD] [--repeat 5] [--skip-suite] [--out FILE.md]

Both commits are checked out into temporary git worktrees, each with its own virtualenv (its pinned
dependencies, installed from the same package index), so edits in the working tree change nothing. Then,
interleaved so that load on the machine falls on both alike: every CLI verb on one demo stack, cold (a fresh
process each time), `--repeat` times each; the policy runner's 10,000-resource benchmark once per tree; and,
unless `--skip-suite`, the whole test suite once per tree (this one also on a single worker). Reported:
medians and the ratio new / old. Figures depend on the machine, which is written down with them. With
--out, the section below the marker in that file is replaced.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from results_file import write_section  # this directory: the script's own

ROOT = Path(__file__).resolve().parents[1]
MARKER = "# This tree against the baseline"
# One demo stack per verb; the verbs exist in both trees with the same arguments.
VERBS = [
    ("preview", ["preview", "--stack", "registry"]),
    ("preview (training)", ["preview", "--stack", "training-demo"]),
    ("policy", ["policy", "--stack", "serving-demo"]),
    ("cost", ["cost", "--stack", "training-demo"]),
    ("diagram", ["diagram", "--stack", "serving-demo", "--out", "{tmp}/stacks.dot"]),
    ("report", ["report", "--stack", "registry", "--markdown"]),
    ("schema", ["schema"]),
    ("catalog", ["catalog", "p5.48xlarge"]),
    ("run --help", ["run", "--help"]),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="3faaab4", help="commit to compare with (default: main before issue 15)")
    parser.add_argument("--this", default="HEAD", help="commit measured against the baseline (default: HEAD)")
    parser.add_argument("--repeat", type=int, default=5, help="cold runs of each verb per tree")
    parser.add_argument("--skip-suite", action="store_true", help="do not time the test suites")
    parser.add_argument("--out", type=Path, help="write the results section into this Markdown file")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="mlinfra-compare-"))
    # Both trees are clean checkouts with their own virtualenvs: edits in the working tree change nothing.
    trees = {"old": work / "baseline", "new": work / "this"}
    commits = {"old": args.baseline, "new": args.this}
    try:
        for name, tree in trees.items():
            _install(commits[name], tree)
        rows = _verbs(trees, args.repeat, work)
        runner = {name: _policy_runner(tree) for name, tree in trees.items()}
        suite = {}
        if not args.skip_suite:  # each tree as its `make test` runs it; this tree also on one worker
            new = trees["new"]
            suite = {
                "old": _suite(trees["old"], []),
                "new": _suite(new, ["-n", "auto"]),
                "new, one worker": _suite(new, []),
            }
    finally:
        for tree in trees.values():
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    text = _markdown(args, rows, runner, suite)
    print(text)
    if args.out:
        write_section(args.out, MARKER, text)
    return 0


def _install(commit: str, tree: Path) -> None:
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), commit], cwd=ROOT, check=True, capture_output=True)
    print(f"installing {commit} into {tree}/.venv ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(tree / ".venv")], check=True)
    pip = [str(tree / ".venv/bin/pip"), "install", "--quiet", "--disable-pip-version-check", ".[test]"]
    subprocess.run(pip, cwd=tree, check=True)
    # The verbs run the tree's own sources (the working directory comes first on sys.path). A user's first run
    # writes their bytecode and every later run reads it; where PYTHONDONTWRITEBYTECODE is set (this machine sets
    # it) nothing would be written and every timed run would compile the tree again. Compile it once, as that
    # first run does.
    compile_all = [_python(tree), "-m", "compileall", "-q", "-x", r"[/\\]\.venv[/\\]", "."]
    subprocess.run(compile_all, cwd=tree, check=False, capture_output=True)  # a file that does not compile is not run


def _python(tree: Path) -> str:
    return str(tree / ".venv" / "bin" / "python")


def _verbs(trees: dict[str, Path], repeat: int, work: Path) -> list[tuple[str, float, float]]:
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(repeat):
        for label, argv in VERBS:
            for name, tree in trees.items():  # interleaved: old and new see the same moment of the machine
                argv_here = [a.replace("{tmp}", str(work)) for a in argv]
                started = time.perf_counter()
                done = subprocess.run([_python(tree), "-m", "infra", *argv_here], cwd=tree, capture_output=True)
                elapsed = time.perf_counter() - started
                if done.returncode not in (0, 1):
                    raise SystemExit(
                        f"{name}: python -m infra {' '.join(argv_here)} exited {done.returncode}: "
                        f"{done.stderr.decode()[-500:]}"
                    )
                times.setdefault((label, name), []).append(elapsed)
    return [
        (label, statistics.median(times[(label, "old")]), statistics.median(times[(label, "new")]))
        for label, _ in VERBS
    ]


def _policy_runner(tree: Path) -> float:
    done = subprocess.run(
        [_python(tree), "benchmarks/policy_bench.py", "--resources", "10000", "--repeat", "1"],
        cwd=tree,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tree)},
    )
    found = re.search(r"\|\s*10000\s*\|[^|]*\|[^|]*\|\s*([\d,]+)\s*\|", done.stdout)
    if done.returncode != 0 or not found:
        raise SystemExit(f"policy benchmark failed in {tree}: {done.stdout[-500:]} {done.stderr[-500:]}")
    return float(found.group(1).replace(",", ""))


def _suite(tree: Path, extra: list[str]) -> tuple[float, int]:
    """Wall time and the number of tests run (from a JUnit report: `-q` in the trees' addopts hides the summary)."""
    report = tree / "junit.xml"
    started = time.perf_counter()
    command = [_python(tree), "-m", "pytest", "-q", f"--junit-xml={report}", *extra]
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the suite failed in {tree}: {done.stdout[-1500:]}")
    suites = ET.parse(report).getroot().iter("testsuite")
    return elapsed, sum(int(s.get("tests", 0)) for s in suites)


def _markdown(args, rows, runner, suite) -> str:
    machine = (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )
    skip = " --skip-suite" if args.skip_suite else ""
    lines = [
        MARKER,
        "",
        f"Machine: {machine}. Command: `python benchmarks/compare.py --baseline {args.baseline} --this {args.this} "
        f"--repeat {args.repeat}"
        f"{skip}`. Baseline {args.baseline} (main before the house issue) and this tree"
        " measured side by side, interleaved, in one run; each verb cold (a fresh process, the tree's bytecode"
        " compiled once beforehand as a user's first run writes it), median of the runs.",
        "",
        "| verb | baseline (s) | this tree (s) | ratio |",
        "|---|---|---|---|",
        *(f"| `{label}` | {old:.2f} | {new:.2f} | {new / old:.2f} |" for label, old, new in rows),
        "",
        "| policy runner, 10,000 resources | baseline | this tree | ratio |",
        "|---|---|---|---|",
        f"| resources per second | {runner['old']:,.0f} | {runner['new']:,.0f} | {runner['new'] / runner['old']:.2f} |",
    ]
    if suite:
        (old_s, old_n), (new_s, new_n), (one_s, _) = suite["old"], suite["new"], suite["new, one worker"]
        lines += [
            "",
            "| test suite (as `make test` runs it) | baseline | this tree | ratio |",
            "|---|---|---|---|",
            f"| wall time (s), this tree `-n auto` | {old_s:.0f} | {new_s:.0f} | {new_s / old_s:.2f} |",
            f"| wall time (s), this tree on one worker | {old_s:.0f} | {one_s:.0f} | {one_s / old_s:.2f} |",
            f"| tests run (passed + skipped) | {old_n} | {new_n} | |",
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
