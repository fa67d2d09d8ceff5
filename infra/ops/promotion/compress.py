"""The quantised CUDA variants as llm-compressor builds them (a program; the library vLLM's users convert with, and
whose output, compressed-tensors, is the format vLLM loads natively).

    python3 compress.py --scheme fp8|int8|int4 --checkpoint DIR [--calibration DIR] --out DIR

It runs llm-compressor's `oneshot` in the converter environment (images/converter/requirements.txt: llm-compressor with
the compressed-tensors and transformers it pins, which differ from the vLLM image's) with the recipe of the scheme:

    fp8   QuantizationModifier FP8_DYNAMIC                   per-channel fp8 weights, dynamic per-token activations;
                                                             round to nearest, no calibration data
    int8  SmoothQuantModifier (strength 0.8), then           activation outliers moved into the weights, then int8
          GPTQModifier W8A8                                  weights by GPTQ's error-compensating rounding,
                                                             dynamic per-token int8 activations
    int4  AWQModifier W4A16 (duo scaling, its grid)          AWQ's activation-aware scales, then int4 weights in
                                                             groups of 128

every Linear but lm_head, with llm-compressor's preset schemes (compressed-tensors' FP8_DYNAMIC, W8A8, W4A16) and
its default mappings for the architecture. int8 and int4 read calibration data: `calibration.jsonl` in the
calibration directory (the registry's datasets/calibration/<name>/, one `{"text": ...}` per line, evaluate.py's
reader); the first --samples lines, each cut to its first --tokens tokens. The checkpoint is checked as
quantize.py's conversion checks it (a Hugging Face safetensors checkpoint of a supported architecture, not already
quantised) before anything loads. Bad input exits 2 with one line; the last line of stdout is a JSON report.

Where the host has no accelerator (the CPU tier's tests), llm-compressor still page-locks its cached activations
for the host-to-device copies it would make; page-locking needs a device, so there it is made the identity (it
changes no value).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

CALIBRATION_FILE = "calibration.jsonl"
SAMPLES = 128
TOKENS = 512
# Not the modifier's default (0.5): more of the activations' outliers moved into the weights, which per-channel int8
# weights absorb better than per-token int8 activations do. A choice, not a measurement.
SMOOTHING_STRENGTH = 0.8
CALIBRATED = ("int8", "int4")


def _sibling(name: str) -> ModuleType:
    """quantize.py or evaluate.py: this package's module, or the file beside this one (the Job writes them all
    into /work, and python3 puts a program's directory first on its path)."""
    return importlib.import_module(f"{__package__}.{name}" if __package__ else name)


def recipe(scheme: str) -> list[Any]:
    """llm-compressor's modifiers for `scheme`."""
    from llmcompressor.modifiers.awq import AWQModifier
    from llmcompressor.modifiers.quantization import GPTQModifier, QuantizationModifier
    from llmcompressor.modifiers.smoothquant import SmoothQuantModifier

    ignore = ["lm_head"]
    if scheme == "fp8":
        return [QuantizationModifier(targets="Linear", scheme="FP8_DYNAMIC", ignore=ignore)]
    if scheme == "int8":
        return [
            SmoothQuantModifier(smoothing_strength=SMOOTHING_STRENGTH),
            GPTQModifier(targets="Linear", scheme="W8A8", ignore=ignore),
        ]
    # AWQModifier(scheme=...) stands for two modifiers, the scale search and the quantisation after it.
    awq = AWQModifier(targets=["Linear"], scheme="W4A16", ignore=ignore)
    return list(awq) if isinstance(awq, list | tuple) else [awq]


def _without_an_accelerator() -> None:
    import torch

    if not torch.cuda.is_available():
        torch.Tensor.pin_memory = lambda self, *args, **kwargs: self


def calibration_dataset(texts: list[str], tokenizer: Any, tokens: int) -> Any:
    from datasets import Dataset

    encoded = Dataset.from_dict({"text": texts})
    return encoded.map(
        lambda row: tokenizer(row["text"], truncation=True, max_length=tokens, add_special_tokens=False),
        remove_columns=["text"],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="a quantised CUDA variant built by llm-compressor")
    parser.add_argument("--scheme", required=True, choices=["fp8", "int8", "int4"])
    parser.add_argument("--checkpoint", required=True, type=Path, help="a Hugging Face checkpoint directory")
    parser.add_argument("--calibration", type=Path, help=f"a directory holding {CALIBRATION_FILE} (int8, int4)")
    parser.add_argument("--out", required=True, type=Path, help="the artefact directory to write")
    parser.add_argument("--samples", type=int, default=SAMPLES, help="calibration lines used (the first ones)")
    parser.add_argument("--tokens", type=int, default=TOKENS, help="tokens of each sample (its first ones)")
    args = parser.parse_args(argv)
    if min(args.samples, args.tokens) < 1:
        parser.error("--samples and --tokens: at least 1")
    if args.scheme in CALIBRATED and args.calibration is None:
        parser.error(f"--calibration: --scheme {args.scheme} reads calibration data")
    evaluate, quantize = _sibling("evaluate"), _sibling("quantize")
    texts: list[str] = []
    try:  # before the model is loaded: the checkpoint as vLLM will take it, and the data
        quantize.checkpoint_config(args.checkpoint)
        if args.scheme in CALIBRATED:
            rows = evaluate.read_jsonl(args.calibration / CALIBRATION_FILE, ("text",))[: args.samples]
            texts = [row["text"] for row in rows if row["text"].strip()]
            if not texts:
                raise evaluate.BadEvaluationData(f"{args.calibration / CALIBRATION_FILE}: no text")
    except (quantize.BadCheckpoint, evaluate.BadEvaluationData) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    import llmcompressor
    import torch
    import transformers
    from llmcompressor import oneshot

    _without_an_accelerator()
    started = time.monotonic()
    tokenizer = transformers.AutoTokenizer.from_pretrained(args.checkpoint)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        args.checkpoint, dtype=torch.bfloat16 if torch.cuda.is_available() else torch.float32
    )
    calibration = {}
    if texts:
        calibration = {
            "dataset": calibration_dataset(texts, tokenizer, args.tokens),
            "max_seq_length": args.tokens,
            "num_calibration_samples": len(texts),
            # In file order: the same checkpoint and data give the same artefact (oneshot shuffles by default).
            "shuffle_calibration_samples": False,
        }
    modifiers = recipe(args.scheme)
    oneshot(model=model, recipe=modifiers, output_dir=str(args.out), **calibration)
    tokenizer.save_pretrained(args.out)
    report = {
        "scheme": args.scheme,
        "library": f"llmcompressor {llmcompressor.__version__}",
        "modifiers": [type(m).__name__ for m in modifiers],
        "samples": len(texts),
        "seconds": round(time.monotonic() - started, 1),
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
