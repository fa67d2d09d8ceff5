"""The quality evaluation a quantised variant is held to: the same fixed evaluation on the bf16 reference and on
the variant (a program: standard library and torch only; its tests run it for real on CPU).

  held-out perplexity  exp(mean negative log-likelihood) of every next token of the held-out sequences, with
                       a 95% paired bootstrap interval of the variant's relative increase (resampling sequences)
  exact match          greedy continuation of each task prompt compared with its answer, token for token; the
                       share right with a 95% Wilson interval, and the paired drop (reference - variant) with a
                       95% paired bootstrap interval (resampling tasks)

A model here is any callable taking a (1, n) tensor of token ids and returning (1, n, vocabulary) logits, or an
object with `.logits` (Hugging Face's output). Perplexity alone is not enough: task scores can collapse while
perplexity stays flat (AutoAWQ issue 475: HumanEval 0.67 -> 0.37), hence both.

The program loads the models with transformers (and safetensors, for a neuron-int8 artefact: load_nxd_int8), which
the server images have (tests/contracts/data/images.json), one at a time: the reference is measured and freed
before the variant is loaded. A promotion measures its reference once per place it is evaluated (--save-reference,
kept with the version in the registry) and each variant against those figures (--reference-figures): they hold the
evaluation data's digest and the encoded tokens', so figures of other data or another tokenizer are refused.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import math
import random
import sys
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

Model = Callable[[torch.Tensor], Any]
Z95 = 1.959964
BOOTSTRAP_SAMPLES = 2000


def _logits(model: Model, ids: Sequence[int]) -> torch.Tensor:
    out = model(torch.tensor([list(ids)], dtype=torch.long))
    return (out.logits if hasattr(out, "logits") else out)[0].float()


def sequence_nll(model: Model, ids: Sequence[int]) -> tuple[float, int]:
    """(summed negative log-likelihood, tokens predicted) of one sequence."""
    with torch.no_grad():
        logits = _logits(model, ids[:-1])
        target = torch.tensor(list(ids[1:]), dtype=torch.long)
        nll = torch.nn.functional.cross_entropy(logits, target, reduction="sum").item()
    return nll, len(ids) - 1


def greedy(model: Model, prompt: Sequence[int], new_tokens: int) -> list[int]:
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(new_tokens):
            ids.append(int(_logits(model, ids)[-1].argmax()))
    return ids[len(prompt) :]


def exact_matches(model: Model, tasks: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[bool]:
    return [greedy(model, prompt, len(answer)) == list(answer) for prompt, answer in tasks]


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _percentiles(values: list[float]) -> tuple[float, float]:
    values.sort()
    return values[int(0.025 * (len(values) - 1))], values[int(0.975 * (len(values) - 1))]


def perplexity_increase_interval(
    reference: Sequence[tuple[float, int]], variant: Sequence[tuple[float, int]], seed: int = 0
) -> tuple[float, float]:
    """95% paired bootstrap interval of ppl(variant) / ppl(reference) - 1, resampling sequences."""
    rng = random.Random(seed)
    n = len(reference)
    draws = []
    for _ in range(BOOTSTRAP_SAMPLES):
        pick = [rng.randrange(n) for _ in range(n)]
        tokens = sum(reference[i][1] for i in pick)
        ref = sum(reference[i][0] for i in pick) / tokens
        var = sum(variant[i][0] for i in pick) / tokens
        draws.append(math.exp(var - ref) - 1)
    return _percentiles(draws)


def drop_interval(reference: Sequence[bool], variant: Sequence[bool], seed: int = 0) -> tuple[float, float]:
    """95% paired bootstrap interval of the exact-match drop (reference - variant), resampling tasks."""
    rng = random.Random(seed)
    n = len(reference)
    draws = []
    for _ in range(BOOTSTRAP_SAMPLES):
        pick = [rng.randrange(n) for _ in range(n)]
        draws.append(sum(int(reference[i]) - int(variant[i]) for i in pick) / n)
    return _percentiles(draws)


@dataclass(frozen=True)
class Comparison:
    """The figures of one variant against its reference on one fixed evaluation."""

    sequences: int
    tokens: int
    perplexity_reference: float
    perplexity_variant: float
    perplexity_increase: float  # relative: ppl(variant) / ppl(reference) - 1
    perplexity_increase_ci95: tuple[float, float]
    tasks: int
    exact_match_reference: float
    exact_match_variant: float
    exact_match_reference_ci95: tuple[float, float]
    exact_match_variant_ci95: tuple[float, float]
    task_drop: float  # exact match, reference - variant (absolute share)
    task_drop_ci95: tuple[float, float]

    def as_dict(self) -> dict[str, Any]:
        def r(x: float) -> float:
            return round(x, 4)

        return {
            "perplexity": {
                "sequences": self.sequences,
                "tokens": self.tokens,
                "reference": r(self.perplexity_reference),
                "variant": r(self.perplexity_variant),
                "increase": r(self.perplexity_increase),
                "increaseCi95": [r(x) for x in self.perplexity_increase_ci95],
            },
            "exactMatch": {
                "tasks": self.tasks,
                "reference": r(self.exact_match_reference),
                "variant": r(self.exact_match_variant),
                "referenceCi95": [r(x) for x in self.exact_match_reference_ci95],
                "variantCi95": [r(x) for x in self.exact_match_variant_ci95],
                "drop": r(self.task_drop),
                "dropCi95": [r(x) for x in self.task_drop_ci95],
            },
        }


@dataclass(frozen=True)
class Measurement:
    """What one model did on the evaluation: each held-out sequence's (nll, tokens), each task right or not."""

    nll: list[tuple[float, int]]
    exact: list[bool]


def measure(
    model: Model, held_out: Sequence[Sequence[int]], tasks: Sequence[tuple[Sequence[int], Sequence[int]]]
) -> Measurement:
    """One model on the fixed evaluation (the program measures the reference, frees it, then the variant)."""
    if not held_out or not tasks:
        raise ValueError("the evaluation needs held-out sequences and tasks")
    return Measurement([sequence_nll(model, ids) for ids in held_out], exact_matches(model, tasks))


def combine(reference: Measurement, variant: Measurement, seed: int = 0) -> Comparison:
    """The variant's figures against the reference's, from their measurements on the same evaluation."""
    if len(reference.nll) != len(variant.nll) or len(reference.exact) != len(variant.exact):
        raise ValueError("the two measurements are of different evaluations")
    tokens = sum(n for _, n in reference.nll)
    ppl_ref = math.exp(sum(x for x, _ in reference.nll) / tokens)
    ppl_var = math.exp(sum(x for x, _ in variant.nll) / tokens)
    ref_em, var_em = reference.exact, variant.exact
    n = len(ref_em)
    return Comparison(
        sequences=len(reference.nll),
        tokens=tokens,
        perplexity_reference=ppl_ref,
        perplexity_variant=ppl_var,
        perplexity_increase=ppl_var / ppl_ref - 1,
        perplexity_increase_ci95=perplexity_increase_interval(reference.nll, variant.nll, seed),
        tasks=n,
        exact_match_reference=sum(ref_em) / n,
        exact_match_variant=sum(var_em) / n,
        exact_match_reference_ci95=wilson(sum(ref_em), n),
        exact_match_variant_ci95=wilson(sum(var_em), n),
        task_drop=(sum(ref_em) - sum(var_em)) / n,
        task_drop_ci95=drop_interval(ref_em, var_em, seed),
    )


def compare(
    reference: Model,
    variant: Model,
    held_out: Sequence[Sequence[int]],
    tasks: Sequence[tuple[Sequence[int], Sequence[int]]],
    seed: int = 0,
) -> Comparison:
    """Run the one evaluation on both models."""
    return combine(measure(reference, held_out, tasks), measure(variant, held_out, tasks), seed)


def release() -> None:
    """Give back the memory of a model nobody holds any more (host, and the GPU's cache)."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# --- the program: python3 evaluate.py --reference DIR --variant DIR --data DIR --out quality.json -----------
# The data prefix (datasets/evals/<name>/, fetched from the registry by the Job) holds held-out.jsonl
# ({"text": ...} per line) and tasks.jsonl ({"prompt": ..., "answer": ...} per line).
Encode = Callable[[str], list[int]]
Loader = Callable[[str], tuple[Model, Encode]]


class BadEvaluationData(ValueError):
    pass


def read_jsonl(path: Path, keys: tuple[str, ...]) -> list[dict[str, str]]:
    if not path.is_file():
        raise BadEvaluationData(f"{path}: no such file")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise BadEvaluationData(f"{path}:{number}: not JSON ({error.msg})") from None
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) and row[k] for k in keys):
            raise BadEvaluationData(f"{path}:{number}: needs {' and '.join(repr(k) for k in keys)} as text")
        rows.append(row)
    if not rows:
        raise BadEvaluationData(f"{path}: empty")
    return rows


def encoded_tasks(encode: Encode, tasks: list[dict[str, str]]) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, answer ids), the answer as the joint encoding continues the prompt's."""
    pairs = []
    for task in tasks:
        prompt = encode(task["prompt"])
        joint = encode(task["prompt"] + task["answer"])
        pairs.append((prompt, joint[len(prompt) :] if joint[: len(prompt)] == prompt else encode(task["answer"])))
    return pairs


# --- a neuron-int8 artefact: NxD Inference's quantized checkpoint (tests/contracts/data/nxd_inference.json) -----
# transformers cannot load the compiled Neuron model, but int8 weight-only serves the dequantised weights (int8
# values times their per-channel scale) with bf16 compute: the variant is measured on the host CPU as the
# reference's architecture with those weights. What is measured is the weights' error, not the arithmetic of the
# Neuron kernels.
NXD_QUANTIZED = "neuron-quantized"  # the artefact's quantized checkpoint (infra/serving/engine.py)


class BadArtefact(ValueError):
    pass


def _nxd_files(directory: Path) -> list[Path]:
    """model.safetensors, else the shards its index names (NxD Inference's own reading order)."""
    if (directory / "model.safetensors").is_file():
        return [directory / "model.safetensors"]
    index = directory / "model.safetensors.index.json"
    if not index.is_file():
        raise BadArtefact(f"{directory}: neither model.safetensors nor model.safetensors.index.json")
    return [
        directory / name for name in sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
    ]


def load_nxd_int8(model: torch.nn.Module, directory: Path) -> torch.nn.Module:
    """Fill `model` (Hugging Face parameter names) with the weights a neuron-int8 server computes with: each int8
    `<layer>.weight` times its float32 `<layer>.scale` (one per output channel), every other tensor as written,
    all in the model's dtype. NxD Inference names the decoder's tensors without `model.`. One tensor at a time."""
    from safetensors import safe_open

    target = model.state_dict(keep_vars=True)
    filled: set[str] = set()
    with ExitStack() as stack:
        handles: dict[str, Any] = {}  # tensor name -> the open file holding it
        for path in _nxd_files(directory):
            handle = stack.enter_context(safe_open(str(path), framework="pt", device="cpu"))
            handles.update(dict.fromkeys(handle.keys(), handle))
        for key, handle in handles.items():
            if key.endswith(".scale"):
                if key[: -len("scale")] + "weight" not in handles:
                    raise BadArtefact(f"{directory}: {key} scales no weight")
                continue
            tensor = handle.get_tensor(key)
            if tensor.dtype == torch.int8:
                scale_key = key[: -len("weight")] + "scale"
                if not key.endswith(".weight") or scale_key not in handles:
                    raise BadArtefact(f"{directory}: int8 {key} has no {scale_key}")
                tensor = tensor.to(torch.float32) * handles[scale_key].get_tensor(scale_key).to(torch.float32)
            name = key if key.startswith("lm_head.") else "model." + key
            if name not in target:
                raise BadArtefact(f"{directory}: {key} is no tensor of the model ({name})")
            if tuple(target[name].shape) != tuple(tensor.shape):
                raise BadArtefact(f"{directory}: {key} is {list(tensor.shape)}, the model's {list(target[name].shape)}")
            with torch.no_grad():
                target[name].copy_(tensor.to(target[name].dtype))
            filled.add(name)
    tied = {"lm_head.weight"} if getattr(getattr(model, "config", None), "tie_word_embeddings", False) else set()
    missing = sorted(set(target) - filled - tied)
    if missing:
        raise BadArtefact(f"{directory}: no {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}")
    return model.eval()


def compressed_load_options(path: str) -> dict[str, Any]:
    """A compressed-tensors artefact is decompressed as it loads: transformers 5 (the vLLM 0.33.0 image's) otherwise
    keeps its quantised weights in plain Linear layers that cannot compute. The gate then measures the artefact's
    weights, dequantised exactly as the library decodes them."""
    import transformers

    config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    if (config.get("quantization_config") or {}).get("quant_method") != "compressed-tensors":
        return {}
    return {"quantization_config": transformers.CompressedTensorsConfig(run_compressed=False)}


def task_comparison(reference: Path, variant: Path) -> dict[str, Any]:
    """Per lm-eval task, its first metric for the reference and the variant and the drop (the reference's score less
    the variant's, or the other way round for a metric where lower is better), from two lm_tasks.py scores files."""
    try:
        ours, theirs = (json.loads(path.read_text(encoding="utf-8"))["tasks"] for path in (reference, variant))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise BadEvaluationData(f"--task-scores: {error}") from None
    if set(ours) != set(theirs) or not ours:
        raise BadEvaluationData(f"--task-scores: {reference} and {variant} score different tasks")
    compared = {}
    for task, scored in sorted(ours.items()):
        metric = next(iter(scored["metrics"]), None)
        if metric is None or metric not in theirs[task]["metrics"]:
            raise BadEvaluationData(f"--task-scores: task {task} has no metric both score")
        higher = scored["higherIsBetter"].get(metric, True)
        ref, var = scored["metrics"][metric], theirs[task]["metrics"][metric]
        compared[task] = {
            "metric": metric,
            "documents": scored["documents"],
            "reference": round(ref, 4),
            "variant": round(var, 4),
            "drop": round(ref - var if higher else var - ref, 4),
        }
    return compared


def transformers_model(path: str) -> tuple[Any, Any, str]:
    """(model, tokenizer, device) of a Hugging Face checkpoint on the Job's accelerator (a compressed-tensors
    artefact decompressed), or of a neuron-int8 artefact (its NXD_QUANTIZED directory) on the CPU, built from its
    config and filled by load_nxd_int8. lm_tasks.py scores the same object."""
    import transformers

    quantized = Path(path) / NXD_QUANTIZED
    if quantized.is_dir():
        device = "cpu"  # the Neuron devices run compiled graphs only
        config = transformers.AutoConfig.from_pretrained(path)
        dtype = config.torch_dtype if isinstance(config.torch_dtype, torch.dtype) else torch.float32
        model = load_nxd_int8(transformers.AutoModelForCausalLM.from_config(config, torch_dtype=dtype), quantized)
    else:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        model = transformers.AutoModelForCausalLM.from_pretrained(
            path, torch_dtype="auto", **compressed_load_options(path)
        )
        model = model.to(device).eval()
    return model, transformers.AutoTokenizer.from_pretrained(path), device


def transformers_loader(path: str) -> tuple[Model, Encode]:
    """The model as the evaluation calls it (ids in, logits out) and its tokenizer's encoding."""
    model, tokenizer, device = transformers_model(path)
    return (lambda ids: model(ids.to(device))), (lambda text: list(tokenizer(text).input_ids))


FIGURES_FORMAT = "mlinfra-reference-figures/1"


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, separators=(",", ":")).encode()).hexdigest()


def figures_record(of_reference: Measurement, data: str, encoded: str) -> dict[str, Any]:
    """The reference's measurement as --save-reference writes it: `data`, `encoded`: digests of the evaluation
    data and of its encoding (the sequences and task pairs as token ids)."""
    return {
        "format": FIGURES_FORMAT,
        "evaluationData": data,
        "encoded": encoded,
        "nll": [[x, n] for x, n in of_reference.nll],
        "exact": of_reference.exact,
    }


def read_figures(path: Path, data: str, encoded: str) -> Measurement:
    """The reference's measurement from --reference-figures, refused when it is of other data or tokens."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if record["format"] != FIGURES_FORMAT:
            raise BadEvaluationData(f"{path}: format {record['format']!r}, not {FIGURES_FORMAT}")
        if record["evaluationData"] != data:
            raise BadEvaluationData(f"{path}: the reference was measured on other evaluation data")
        if record["encoded"] != encoded:
            raise BadArtefact(f"{path}: the variant's tokenizer encodes the evaluation otherwise than the reference's")
        return Measurement([(float(x), int(n)) for x, n in record["nll"]], [bool(e) for e in record["exact"]])
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        if isinstance(error, BadEvaluationData | BadArtefact):
            raise
        raise BadEvaluationData(f"{path}: not reference figures ({error})") from None


def main(argv: list[str] | None = None, load: Loader = transformers_loader) -> int:
    parser = argparse.ArgumentParser(description="the quality gate's evaluation: reference and variant, one data set")
    reference_from = parser.add_mutually_exclusive_group(required=True)
    reference_from.add_argument("--reference", help="the bf16 reference model (a Hugging Face directory)")
    reference_from.add_argument(
        "--reference-figures", type=Path, help="the reference's measurement, as --save-reference wrote it"
    )
    parser.add_argument("--save-reference", type=Path, help="write the reference's measurement there")
    parser.add_argument("--variant", help="the quantised variant (as the server loads it)")
    parser.add_argument("--data", required=True, type=Path, help="held-out.jsonl and tasks.jsonl")
    parser.add_argument("--out", type=Path, help="quality.json to write (with --variant)")
    parser.add_argument(
        "--task-scores",
        nargs=2,
        type=Path,
        metavar=("REFERENCE", "VARIANT"),
        help="lm_tasks.py's scores.json of the reference and of the variant: recorded beside the figures",
    )
    args = parser.parse_args(argv)
    if args.variant is None and args.save_reference is None:
        parser.error("--variant is required unless --save-reference measures the reference alone")
    if (args.variant is None) != (args.out is None):
        parser.error("--variant and --out go together")
    if args.save_reference is not None and args.reference is None:
        parser.error("--save-reference needs --reference")
    try:
        held_out = read_jsonl(args.data / "held-out.jsonl", ("text",))
        tasks = read_jsonl(args.data / "tasks.jsonl", ("prompt", "answer"))
        scored = task_comparison(*args.task_scores) if args.task_scores else None
    except BadEvaluationData as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    data = digest([held_out, tasks])
    # One model in memory at a time: the reference is measured and let go before the variant is loaded, so the
    # step holds the larger of the two, never both (evaluation.py sizes it so).
    try:
        first, encode = load(args.reference if args.reference is not None else args.variant)
    except BadArtefact as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    sequences = [ids for ids in (encode(row["text"]) for row in held_out) if len(ids) > 1]
    pairs = encoded_tasks(encode, tasks)
    encoded = digest([sequences, pairs])
    if args.reference is None:
        variant = first
        try:
            of_reference = read_figures(args.reference_figures, data, encoded)
        except (BadEvaluationData, BadArtefact) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    else:
        of_reference = measure(first, sequences, pairs)
        del first
        release()
        if args.save_reference is not None:
            record = figures_record(of_reference, data, encoded)
            args.save_reference.write_text(json.dumps(record) + "\n", encoding="utf-8")
        if args.variant is None:
            return 0
        try:
            variant, _ = load(args.variant)
        except BadArtefact as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    figures = combine(of_reference, measure(variant, sequences, pairs)).as_dict()
    if scored is not None:
        figures["lmEval"] = scored
    args.out.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
