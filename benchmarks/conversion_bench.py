"""Benchmark (not a test): the quantised CUDA variants' conversion program (quantize.py convert) on CPU.

    PYTHONPATH=. python benchmarks/conversion_bench.py [--out benchmarks/RESULTS.md]

1. Quality: trains the tests' tiny Llama-shaped model (tests/infra/ops/promotion/tiny_llama.py), writes it as a
   sharded safetensors checkpoint, converts it per scheme by running the program file as the Job does (int4 both
   round to nearest and, as cuda-int4's recipe builds it, with AWQ's scales from awq.py on the training lines as
   calibration data), reads the compressed-tensors artefact back with the recorded decoding and evaluates it
   against the reference (evaluate.py) under the default budget (quality.py).
2. Cost: a synthetic checkpoint with two decoder layers of Llama-3-8B's shapes (hidden 4096, intermediate 14336,
   8 KV heads) and its full embeddings and lm_head, random bf16 weights: wall time, peak resident memory and
   sizes per scheme. Peak memory counts the checkpoint's pages mapped while they are read.
`--out` replaces only this benchmark's section of the file.
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

import torch
from safetensors.torch import save_file

from benchmarks.quality_bench import ci
from benchmarks.results_file import publish
from infra.ops.promotion import evaluate, quality, quantize
from tests.infra.ops.promotion import tiny_llama

HEADING = "# Quantised CUDA artefacts on CPU: the conversion program"
SCHEMES = {"fp8": "cuda-fp8", "int8": "cuda-int8", "int4": "cuda-int4"}
BUILDS = (("fp8", "cuda-fp8", False), ("int8", "cuda-int8", False), ("int4", "int4, round to nearest", False))
BUILDS += (("int4", "cuda-int4 (AWQ)", True),)
PROGRAM = Path(quantize.__file__)
AWQ_PROGRAM = PROGRAM.with_name("awq.py")  # beside quantize.py and evaluate.py, as the Job writes them
# The program run as the Job runs it, reporting its own peak resident memory on stderr's last line: VmHWM of
# /proc/self/status, in KiB (per address space, so not the parent's peak, which ru_maxrss would carry over exec).
MEASURED = (
    "import runpy, sys\n"
    "sys.argv = sys.argv[1:]\n"
    "code = 0\n"
    "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
    "except SystemExit as done:\n    code = done.code\n"
    "hwm = [line for line in open('/proc/self/status') if line.startswith('VmHWM:')][0]\n"
    "print(hwm.split()[1], file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def convert(checkpoint: Path, out: Path, scheme: str, *more: str) -> tuple[dict[str, int], float, int]:
    """(the program's report, wall seconds, peak resident KiB)."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", MEASURED, str(PROGRAM), "convert", "--scheme", scheme, "--checkpoint",
         str(checkpoint), "--out", str(out), *more],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1]), time.perf_counter() - started, int(done.stderr.split()[-1])


def synthetic(path: Path, layers: int = 2) -> int:
    """Llama-3-8B-shaped layers, random bf16 weights; returns the checkpoint's bytes."""
    hidden, intermediate, kv, vocabulary = 4096, 14336, 1024, 128256
    generator = torch.Generator().manual_seed(0)

    def weight(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=generator) * 0.02).to(torch.bfloat16)

    path.mkdir(parents=True)
    ones = torch.ones(hidden, dtype=torch.bfloat16)
    save_file(
        {"model.embed_tokens.weight": weight(vocabulary, hidden), "lm_head.weight": weight(vocabulary, hidden),
         "model.norm.weight": ones},
        str(path / "model-00001-of-00002.safetensors"),
    )  # fmt: skip
    tensors = {}
    for i in range(layers):
        shapes = {
            "self_attn.q_proj": (hidden, hidden), "self_attn.k_proj": (kv, hidden), "self_attn.v_proj": (kv, hidden),
            "self_attn.o_proj": (hidden, hidden), "mlp.gate_proj": (intermediate, hidden),
            "mlp.up_proj": (intermediate, hidden), "mlp.down_proj": (hidden, intermediate),
        }  # fmt: skip
        tensors |= {f"model.layers.{i}.{name}.weight": weight(*shape) for name, shape in shapes.items()}
        tensors |= {
            f"model.layers.{i}.{n}.weight": ones.clone() for n in ("input_layernorm", "post_attention_layernorm")
        }
    save_file(tensors, str(path / "model-00002-of-00002.safetensors"))
    (path / "config.json").write_text(
        json.dumps({"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"}), encoding="utf-8"
    )
    return sum(f.stat().st_size for f in path.glob("*.safetensors"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    started = time.perf_counter()
    reference, text = tiny_llama.trained()
    held_out = [text.encode("\n" + line) for line in text.held_out]
    rows, costs = [], []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        tiny_llama.save_checkpoint(reference, text, root / "tiny")
        (root / "calibration").mkdir()
        lines = [line for line in text.train.splitlines() + text.facts if line.strip()]
        (root / "calibration" / "calibration.jsonl").write_text(
            "".join(json.dumps({"text": t}) + "\n" for t in lines), encoding="utf-8"
        )
        search_started = time.perf_counter()
        searched = subprocess.run(
            [sys.executable, str(AWQ_PROGRAM), "--checkpoint", str(root / "tiny"), "--calibration",
             str(root / "calibration"), "--out", str(root / "scales.safetensors")],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        search = json.loads(searched.stdout.strip().splitlines()[-1]) | {"wall": time.perf_counter() - search_started}
        for scheme, variant, awq in BUILDS:
            out = root / f"tiny-{scheme}{'-awq' if awq else ''}"
            report, _, _ = convert(root / "tiny", out, scheme, *(["--scales", str(root / "scales.safetensors")] * awq))
            result = evaluate.compare(reference, tiny_llama.load_artefact(out), held_out, text.tasks())
            verdict = quality.judge(result.as_dict(), quality.Budget())
            rows.append(
                f"| {variant} | {report['layers']} | {result.perplexity_reference:.3f} | "
                f"{result.perplexity_variant:.3f} | {result.perplexity_increase * 100:+.2f}% "
                f"{ci(result.perplexity_increase_ci95, 100, '+.2f')} | {result.exact_match_reference:.3f} | "
                f"{result.exact_match_variant:.3f} | {result.task_drop * 100:+.1f} | "
                f"{'pass' if verdict.passed else 'FAIL'} |"
            )
        size = synthetic(root / "big")
        for scheme, variant in SCHEMES.items():
            report, wall, peak = convert(root / "big", root / f"big-{scheme}", scheme)
            costs.append(
                f"| {variant} | {report['parameters'] / 1e6:.0f}M | {size / 2**30:.2f} | {report['bytes'] / 2**30:.2f} "
                f"| {wall:.1f} | {report['parameters'] / wall / 1e6:.1f} | {peak / 2**20:.2f} |"
            )
            for part in (root / f"big-{scheme}").iterdir():
                part.unlink()
    lines = [
        HEADING,
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, torch "
        f"{torch.__version__}. Command: `PYTHONPATH=. python benchmarks/conversion_bench.py`. Load average at the "
        f"end: {os.getloadavg()[0]:.1f} (a shared machine); the whole run took {time.perf_counter() - started:.1f} s.",
        "",
        "Quality: the tests' tiny Llama-shaped model (width 128, two layers, "
        f"{sum(p.numel() for p in reference.parameters())} parameters) converted by `quantize.py convert`, read "
        "back from the artefact (server-side arithmetic: dequantised weights, per-token activations for W8A8) and "
        f"evaluated against the fp32 reference: {len(held_out)} held-out lines, {len(text.tasks())} fact-recall tasks.",
        "",
        "| variant | layers converted | ppl reference | ppl variant | ppl increase [95% CI] | EM ref | EM variant "
        "| EM drop, points | gate |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"AWQ's search (awq.py, run as the Job runs it, on the CPU): {search['groups']} groups, {search['samples']} "
        f"calibration lines ({search['tokens']} tokens: the training prose and facts, one each), "
        f"{search['wall']:.1f} s with starting Python and loading transformers; summed over the groups, the "
        "searched error on its sample of "
        f"input rows is {search['error'] / search['roundToNearestError']:.3f} of round to nearest's. The int4 row "
        "without AWQ is what cuda-int4 was before; it is no longer built.",
        "",
        "Cost: two decoder layers of Llama-3-8B's shapes plus its embeddings and lm_head (random bf16 weights), "
        "converted on the CPU as the Job converts (one process, torch's default threads).",
        "",
        "| variant | weights quantised | checkpoint GiB | artefact GiB | wall s | M weights/s | peak RSS GiB |",
        "|---|---|---|---|---|---|---|",
        *costs,
        "",
        "Peak memory is about one output shard (2 GiB, here the embeddings and lm_head) plus one layer's work; by "
        "construction it does not grow with the number of layers (measured here with two only). A full 8B "
        "checkpoint has 16 times these layers' weights; at these rates its conversion takes minutes on two cores. "
        "Wall times include starting Python and torch. cuda-int4's row is its phase 2 without the scales (folding "
        "them in adds one elementwise product per scaled tensor); its phase 1, AWQ's search, loads the whole model "
        "on the GPUs and was not measured at this size (no GPU here). Only a GPU confirms that vLLM loads the "
        "artefacts and how fast it serves them.",
    ]
    publish(lines, HEADING, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
