"""Benchmark (not a test): the quality gate's CPU tier, every quantisation method against the bf16 reference.

    PYTHONPATH=. python benchmarks/quality_bench.py [--steps 250] [--out benchmarks/RESULTS.md]

Trains the tests' tiny character LM (tests/infra/ops/promotion/tiny_lm.py) on its bundled corpus, quantises a
copy per method (infra/ops/promotion/quantize.py), runs the one evaluation on both (evaluate.py) and judges the
figures against the default budget (quality.py). Two deliberately broken variants (a wrong scale) show the gate
failing. `--out` replaces only this benchmark's section of the file.
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import sys
import time
from pathlib import Path

import torch
from results_file import publish  # this directory: the script's own

from infra.ops.promotion import evaluate, quality, quantize
from tests.infra.ops.promotion import test_quality_tier, tiny_lm

HEADING = "# Quantised variants on CPU: the quality gate's tier"
RUNS = [
    ("int8-weight-only", 1.0),
    ("int8", 1.0),
    ("int4", 1.0),
    ("int4-awq", 1.0),
    ("fp8", 1.0),
    ("int8-weight-only", 0.05),
    ("int4", 0.2),
]


def ci(pair: tuple[float, float], scale: float = 1.0, fmt: str = ".3f") -> str:
    return f"[{pair[0] * scale:{fmt}}, {pair[1] * scale:{fmt}}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=250)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    started = time.perf_counter()
    cpu_started = time.process_time()
    reference, text = tiny_lm.trained(args.steps)
    trained_in = time.perf_counter() - started
    held_out = [text.encode("\n" + line) for line in text.held_out]
    calibration = [torch.tensor([text.encode(line + "\n")]) for line in text.train.splitlines()[:8]]
    tasks = text.tasks()
    rows = []
    for method, scale_error in RUNS:
        model = copy.deepcopy(reference)
        report = quantize.quantise_model(model, method, calibration, scale_error=scale_error)
        result = evaluate.compare(reference, model, held_out, tasks)
        verdict = quality.judge(result.as_dict(), quality.Budget())
        rows.append(
            f"| {method}{'' if scale_error == 1 else f' (scale x{scale_error:g}, broken)'} "
            f"| {report.bytes_per_weight:.3f} "
            f"| {result.perplexity_reference:.3f} | {result.perplexity_variant:.3f} "
            f"| {result.perplexity_increase * 100:+.2f}% {ci(result.perplexity_increase_ci95, 100, '+.2f')} "
            f"| {result.exact_match_reference:.3f} | {result.exact_match_variant:.3f} "
            f"{ci(result.exact_match_variant_ci95)} "
            f"| {result.task_drop * 100:+.1f} {ci(result.task_drop_ci95, 100, '+.1f')} "
            f"| {'pass' if verdict.passed else 'FAIL'} |"
        )
    subtle = test_quality_tier.digits_clipped()
    verdict = quality.judge(subtle.as_dict(), quality.Budget())
    rows.append(
        f"| int8 lm_head digit rows only (scale x0.3, broken) | - "
        f"| {subtle.perplexity_reference:.3f} | {subtle.perplexity_variant:.3f} "
        f"| {subtle.perplexity_increase * 100:+.2f}% {ci(subtle.perplexity_increase_ci95, 100, '+.2f')} "
        f"| {subtle.exact_match_reference:.3f} | {subtle.exact_match_variant:.3f} "
        f"{ci(subtle.exact_match_variant_ci95)} "
        f"| {subtle.task_drop * 100:+.1f} {ci(subtle.task_drop_ci95, 100, '+.1f')} "
        f"| {'pass' if verdict.passed else 'FAIL'} |"
    )
    lines = [
        HEADING,
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, torch "
        f"{torch.__version__}, one thread. "
        f"Command: `PYTHONPATH=. python benchmarks/quality_bench.py --steps {args.steps}`. "
        f"Load average at the end: {os.getloadavg()[0]:.1f} (a shared machine).",
        f"Reference: the tests' tiny character LM ({sum(p.numel() for p in reference.parameters())} parameters), "
        f"trained {args.steps} steps in {trained_in:.1f} s wall; the whole run took "
        f"{time.perf_counter() - started:.1f} s wall, {time.process_time() - cpu_started:.1f} s CPU.",
        f"Evaluation: perplexity over {len(held_out)} held-out lines ({sum(len(h) - 1 for h in held_out)} predicted "
        f"characters), exact match over {len(tasks)} fact-recall tasks; 95% intervals: paired bootstrap (perplexity "
        "increase, exact-match drop), Wilson (exact match). Gate: the default budget, perplexity +5% and 5 points "
        "of exact match. Bytes per weight include one 16-bit scale per channel (per 32 weights for int4).",
        "",
        "| method | bytes/weight | ppl reference | ppl variant | ppl increase [95% CI] | EM ref | EM variant "
        "[95% CI] | EM drop, points [95% CI] | gate |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "The reference computes in fp32 here (the CPU has no bf16 matrix units worth using); the variants hold "
        "quantised numbers and compute in fp32 too, so the figures measure the numbers, not the GPU kernels. A "
        "small held-out set and 24 tasks give wide intervals: the gate judges the point estimates and the "
        "manifest records the intervals beside them. The last row clips only the output rows of the digits: "
        "held-out perplexity (prose) stays within budget while the fact codes are lost, so only the task score "
        "fails it (the pattern of AutoAWQ issue 475).",
    ]
    publish(lines, HEADING, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
