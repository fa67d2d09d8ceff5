"""Benchmark (not a test): llm-compressor's quantised CUDA variants against mlinfra's own quantiser, on CPU, side
by side in one run, and the quality gate's wall time for each.

    make .venv-converter/.installed
    PYTHONPATH=. python benchmarks/llm_compressor_bench.py [--out benchmarks/RESULTS.md]

The tests' tiny Llama-shaped checkpoint and calibration data (tests/infra/ops/promotion/conversions.py) are
converted by quantize.py (fp8 and int8 round to nearest, int4 with awq.py's scales, run as the Job runs them)
and by compress.py in the converter environment (llm-compressor: FP8_DYNAMIC, SmoothQuant + GPTQ W8A8, AWQ
W4A16), each on one thread; every artefact is then gated by evaluate.py (read back with the test extra's
compressed-tensors and transformers, vLLM 0.33.0's) and quality.py's default budget. `--out` replaces only this
benchmark's section of the file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results_file import publish  # this directory: the script's own

from infra.ops.promotion import compress, evaluate, lm_tasks, quality
from tests.infra.ops.promotion import conversions
from tests.infra.ops.promotion.test_llm_compressor import CONVERTER, eval_data

HEADING = "# llm-compressor against mlinfra's quantiser, on CPU"
SCHEMES = ("fp8", "int8", "int4")


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **conversions.ONE_THREAD, "PYTHONPATH": ""},
    )
    if done.returncode:
        sys.exit(done.stderr[-2000:])
    return time.perf_counter() - started


def tasks(root: Path, model: Path) -> tuple[Path, float]:
    """lm_tasks.py's scores of `model` (the converter environment's python, as the Job runs it) and its wall time."""
    out = root / f"tasks-{model.name}.json"
    seconds = timed(
        [str(CONVERTER), lm_tasks.__file__, "--model", str(model), "--data", str(eval_data(root)), "--out", str(out)]
    )
    return out, seconds


def gate(root: Path, variant: Path, reference_tasks: Path) -> tuple[dict[str, object], quality.Verdict, float, float]:
    """The gate on `variant`: its figures, verdict, evaluate.py's wall time and the variant's lm-eval wall time."""
    scores, task_seconds = tasks(root, variant)
    out = root / f"quality-{variant.name}.json"
    started = time.perf_counter()
    argv = ["--reference", str(conversions.checkpoint(root)), "--variant", str(variant), "--data", str(eval_data(root))]
    code = evaluate.main([*argv, "--out", str(out), "--task-scores", str(reference_tasks), str(scores)])
    seconds = time.perf_counter() - started
    assert code == 0
    figures = json.loads(out.read_text(encoding="utf-8"))
    return figures, quality.judge(figures, quality.Budget()), seconds, task_seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    os.environ.update(conversions.ONE_THREAD)
    root = Path(tempfile.mkdtemp(prefix="llmc-bench-"))
    checkpoint, calibration = conversions.checkpoint(root), conversions.calibration(root)
    reference_tasks, reference_seconds = tasks(root, checkpoint)
    rows = []
    for scheme in SCHEMES:
        started = time.perf_counter()
        ours, _ = conversions.converted(root, scheme, awq=scheme == "int4")
        ours_seconds = time.perf_counter() - started
        theirs = root / f"llmc-{scheme}"
        theirs_seconds = timed(
            [
                str(CONVERTER),
                compress.__file__,
                "--scheme",
                scheme,
                "--checkpoint",
                str(checkpoint),
                "--calibration",
                str(calibration),
                "--out",
                str(theirs),
            ]
        )
        for who, path, seconds in (
            ("mlinfra quantize.py" + (" + awq.py" if scheme == "int4" else ""), ours, ours_seconds),
            ("llm-compressor 0.14.0.1", theirs, theirs_seconds),
        ):
            rows.append((scheme, who, seconds, *gate(root, path, reference_tasks)))
    lines = [
        HEADING,
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, one thread. "
        "Command: "
        "`PYTHONPATH=. python benchmarks/llm_compressor_bench.py` (after `make .venv-converter/.installed`). "
        f"Load average at the end: {os.getloadavg()[0]:.1f} (a shared machine).",
        "The tests' tiny Llama-shaped model (width 128, two layers), its 44 calibration lines; each artefact gated as "
        "a promotion gates it: 6 held-out lines (450 characters), 24 fact-recall tasks, default budget (+5% "
        "perplexity, 5 points). Conversion s: wall time of the conversion, starting Python included (mlinfra's int4: "
        "awq.py's search and quantize.py's conversion); lm-eval: the default task's exact match (lm_tasks.py, as "
        "the evaluation Job runs it); gate s: the gate's wall time for the variant, lm_tasks.py on it (starting "
        f"Python and lm-eval included) plus evaluate.py (reference and variant, loading included); the reference's "
        f"lm_tasks.py (run once here; each variant's evaluation Job runs it again): {reference_seconds:.1f} s.",
        "",
        "| scheme | built by | conversion s | ppl reference | ppl variant | ppl increase [95% CI] | EM variant "
        "| lm-eval EM ref / variant | gate | gate s (lm-eval + evaluate) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for scheme, who, seconds, figures, verdict, gate_seconds, task_seconds in rows:
        ppl, em, task = figures["perplexity"], figures["exactMatch"], figures["lmEval"]["mlinfra_exact_match"]
        low, high = ppl["increaseCi95"]
        lines.append(
            f"| {scheme} | {who} | {seconds:.1f} | {ppl['reference']:.3f} | {ppl['variant']:.3f} | "
            f"{ppl['increase']:+.2%} [{low * 100:+.2f}, {high * 100:+.2f}] | {em['variant']:.3f} | "
            f"{task['reference']:.3f} / {task['variant']:.3f} | {'pass' if verdict.passed else 'FAIL'} | "
            f"{task_seconds + gate_seconds:.1f} ({task_seconds:.1f} + {gate_seconds:.1f}) |"
        )
    publish(lines, HEADING, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
