"""AWQ's activation-aware scale search for the cuda-int4 conversion, phase 1 of 2 (a program; the conversion Job
runs it on the variant's GPUs, then quantize.py's streaming `convert --scheme int4 --scales` folds the scales in
and quantises on the CPU).

    python3 awq.py --checkpoint DIR --calibration DIR --out scales.safetensors

It loads the checkpoint with transformers (bf16 on CUDA, fp32 on the CPU; `device_map="auto"` when accelerate
is importable, so a model larger than one GPU still loads; without it the model goes whole onto one GPU), runs
the calibration texts through it one at a time, and searches one scale vector per group of linear layers that
read the same input, in every decoder layer (Hugging Face module names of Llama, Mistral and Qwen2 in
transformers 4.51.3; the groups are AutoAWQ's, awq/models/llama.py `get_layers_for_scaling` at commit 0aa4a596):

    input_layernorm          -> self_attn.q_proj, k_proj, v_proj
    self_attn.v_proj         -> self_attn.o_proj   only when v_proj's outputs are o_proj's inputs (no grouped-query
                                                  attention: AutoAWQ skips it otherwise, as here)
    post_attention_layernorm -> mlp.gate_proj, up_proj
    mlp.up_proj              -> mlp.down_proj

For each group: s = mean|x| ** alpha per input channel (the mean over every calibration token), and AutoAWQ's
"duo scaling" mean|x| ** alpha / mean|w| ** (1 - alpha) (its default; awq/quantize/quantizer.py,
`_search_best_scale`; mean|w| of each input channel relative to its weight group's largest), centred around 1,
alpha in 0, 0.05, ..., 1: the s whose int4 weights (groups of 128, float16 scales, as the artefact stores them)
least change the group's outputs on a sample of its input rows (awq_search; round to nearest, s = 1, is a
candidate). The inputs are those of the unquantised model (AutoAWQ searches each layer on the original model's
activations too). Not done: AutoAWQ's second step, the search for a clipping range of each weight group. Memory:
at most --rows input rows per group are kept (a uniform share of each sample's tokens), on the host in the
model's dtype: rows x (sum of the groups' input widths) x 2 bytes in bf16 (Llama-3-8B at 1024 rows: 32 layers x
22528 x 1024 x 2 B = 1.5 GB), beside the model.

The scales file: safetensors, one fp32 vector per group named by the tensor it divides (the norm's weight, or
v_proj's/up_proj's weight), and metadata `mlinfra.awq`: per vector the tensors it divides along their first
dimension (with a bias, when the layer has one), the linears whose input columns it multiplies, the chosen alpha,
its error and round to nearest's (alpha 0) on the sample.

Calibration data: `calibration.jsonl` in the calibration directory (the registry's datasets/calibration/<name>/),
one `{"text": ...}` per line (evaluate.py's reader: a bad line exits 2 naming file and line); the first --samples
lines are used, each cut to its first --tokens tokens.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import torch
from torch import nn

CALIBRATION_FILE = "calibration.jsonl"
SAMPLES = 128  # AutoAWQ's default n_samples
TOKENS = 512  # AutoAWQ's default max_calib_seq_len
ROWS = 1024  # input rows kept per group for the error of the search
GRID = tuple(i / 20 for i in range(21))  # alpha
Encode = Callable[[str], list[int]]
Loader = Callable[[str], tuple[nn.Module, Encode]]


def _sibling(name: str) -> ModuleType:
    """quantize.py or evaluate.py: this package's module, or the file beside this one (the Job writes them all
    into /work, and python3 puts a program's directory first on its path)."""
    return importlib.import_module(f"{__package__}.{name}" if __package__ else name)


class Choice(NamedTuple):
    s: torch.Tensor
    alpha: float
    duo: bool  # s divided by the weights' mean magnitude ** (1 - alpha), AutoAWQ's duo scaling
    error: float
    nearest: float  # the error at alpha 0 without duo scaling: s = 1, round to nearest


def awq_search(
    weights: list[torch.Tensor],
    x: torch.Tensor,
    importance: torch.Tensor,
    group: int,
    scale_dtype: torch.dtype | None = None,
    duo: bool = False,
) -> Choice:
    """AWQ's grid search for the layers that read the same input `x` (rows of it): s = importance ** alpha (or,
    with `duo`, also AutoAWQ's importance ** alpha / w ** (1 - alpha), w the mean magnitude of each input channel
    of the weights relative to their group's largest), centred around 1, alpha in GRID; the s whose int4 weights
    (w * s in groups of `group`) applied to x / s least change the layers' outputs: the mean squared error over
    all of them. Round to nearest is a candidate (alpha 0), so the choice is never worse on `x`."""
    quantize = _sibling("quantize")
    references = [x @ w.T for w in weights]
    outputs = sum(r.numel() for r in references)
    stacked = torch.cat(weights).abs().reshape(-1, group)
    magnitude = (stacked / (stacked.amax(dim=1, keepdim=True) + 1e-6)).reshape(-1, x.shape[1]).mean(dim=0)
    best: Choice | None = None
    nearest = 0.0
    for with_duo in (False, True) if duo else (False,):
        for alpha in GRID:
            s = importance.clamp(min=1e-6) ** alpha
            s = s / (magnitude ** (1 - alpha) + 1e-4) if with_duo else s
            s = s / (s.max() * s.min()).sqrt()
            error = 0.0
            for w, reference in zip(weights, references, strict=True):
                values, scale = quantize.int4_weights(w * s, group, scale_dtype=scale_dtype)
                error += ((x / s) @ quantize.dequantise(values, scale, group).T - reference).pow(2).sum().item()
            error /= outputs
            nearest = error if alpha == 0 and not with_duo else nearest
            if best is None or error < best.error:
                best = Choice(s, alpha, with_duo, error, 0.0)
    assert best is not None
    return best._replace(nearest=nearest)


@dataclass(frozen=True)
class Group:
    scale: str  # the tensor s is named by: the first tensor it divides
    divides: tuple[str, ...]  # tensors divided by s along their first dimension (a norm's weight; a linear's rows)
    linears: tuple[str, ...]  # modules that read the divided output: their input columns are multiplied by s


def groups(model: nn.Module) -> list[Group]:
    """The scaled groups of every decoder layer (by Hugging Face's module names), in model order."""
    modules = dict(model.named_modules())

    def divided(name: str) -> tuple[str, ...]:
        bias = getattr(modules[name], "bias", None)
        return (f"{name}.weight",) + ((f"{name}.bias",) if isinstance(bias, torch.Tensor) else ())

    found = []
    for name in modules:
        if not name.endswith(".input_layernorm"):
            continue
        layer = name.removesuffix(".input_layernorm")
        attention, mlp = f"{layer}.self_attn", f"{layer}.mlp"
        v, o = modules.get(f"{attention}.v_proj"), modules.get(f"{attention}.o_proj")
        candidates = [
            (name, tuple(f"{attention}.{p}_proj" for p in "qkv")),
            (f"{attention}.v_proj", (f"{attention}.o_proj",))
            if isinstance(v, nn.Linear) and isinstance(o, nn.Linear) and v.out_features == o.in_features
            else None,
            (f"{layer}.post_attention_layernorm", (f"{mlp}.gate_proj", f"{mlp}.up_proj")),
            (f"{mlp}.up_proj", (f"{mlp}.down_proj",)),
        ]
        for candidate in candidates:
            if candidate is None:
                continue
            source, readers = candidate
            if source not in modules or not all(isinstance(modules.get(r), nn.Linear) for r in readers):
                raise ValueError(f"{layer}: no {source} -> {', '.join(readers)} (Llama's module names)")
            names = divided(source)
            found.append(Group(names[0], names, readers))
    return found


class _Inputs:
    """What one group's input looks like over the calibration: the sum of |x| per channel over every token, and
    a bounded sample of rows (`per_sample` random tokens of each sample) on the host."""

    def __init__(self, per_sample: int, generator: torch.Generator) -> None:
        self.per_sample, self.generator = per_sample, generator
        self.absolute: torch.Tensor | None = None
        self.tokens = 0
        self.rows: list[torch.Tensor] = []

    def add(self, x: torch.Tensor) -> None:
        x = x.detach().reshape(-1, x.shape[-1])
        total = x.abs().sum(dim=0, dtype=torch.float32).cpu()
        self.absolute = total if self.absolute is None else self.absolute + total
        self.tokens += x.shape[0]
        pick = torch.randperm(x.shape[0], generator=self.generator)[: self.per_sample]
        self.rows.append(x[pick.to(x.device)].cpu())


def search(
    model: nn.Module, found: list[Group], samples: list[list[int]], rows: int = ROWS, seed: int = 0
) -> dict[str, tuple[torch.Tensor, dict[str, Any]]]:
    """Group -> (s, facts): run every sample through the model with a hook on each group's first reader, then
    search each group (on the device of its weights, in fp32)."""
    quantize = _sibling("quantize")
    modules = dict(model.named_modules())
    generator = torch.Generator().manual_seed(seed)
    inputs = {g.scale: _Inputs(max(1, math.ceil(rows / len(samples))), generator) for g in found}
    hooks = [
        modules[g.linears[0]].register_forward_pre_hook(lambda _m, args, seen=inputs[g.scale]: seen.add(args[0]))
        for g in found
    ]
    device = next(model.parameters()).device
    try:
        with torch.no_grad():
            for ids in samples:
                model(torch.tensor([ids], dtype=torch.long, device=device))
    finally:
        for hook in hooks:
            hook.remove()
    scales = {}
    for g in found:
        seen = inputs[g.scale]
        assert seen.absolute is not None
        weights = [modules[name].weight.detach().float() for name in g.linears]
        at = weights[0].device
        x = torch.cat(seen.rows)[:rows].to(at, torch.float32)
        choice = awq_search(
            weights,
            x,
            (seen.absolute / seen.tokens).to(at),
            quantize.CONVERT_GROUP,
            scale_dtype=torch.float16,
            duo=True,
        )
        facts = {
            "divides": list(g.divides),
            "multiplies": [f"{name}.weight" for name in g.linears],
            "alpha": choice.alpha,
            "duo": choice.duo,
            "error": choice.error,
            "roundToNearestError": choice.nearest,
            "rows": x.shape[0],
        }
        scales[g.scale] = (choice.s.float().cpu(), facts)
    return scales


def write(scales: dict[str, tuple[torch.Tensor, dict[str, Any]]], out: Path) -> None:
    from safetensors.torch import save_file

    metadata = {"mlinfra.awq": json.dumps({name: facts for name, (_, facts) in scales.items()})}
    save_file({name: s.contiguous() for name, (s, _) in scales.items()}, str(out), metadata=metadata)


def transformers_loader(path: str) -> tuple[nn.Module, Encode]:
    """The checkpoint with transformers, on the GPUs when there are any, and its tokenizer."""
    import transformers

    cuda = torch.cuda.is_available()
    placed = {"device_map": "auto"} if cuda and importlib.util.find_spec("accelerate") else {}
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.bfloat16 if cuda else torch.float32, **placed
    )
    if cuda and not placed:
        model = model.to("cuda")
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    return model.eval(), lambda text: list(tokenizer(text).input_ids)


def main(argv: list[str] | None = None, load: Loader = transformers_loader) -> int:
    parser = argparse.ArgumentParser(description="AWQ scales of a checkpoint on calibration data (cuda-int4, phase 1)")
    parser.add_argument("--checkpoint", required=True, help="a Hugging Face checkpoint directory")
    parser.add_argument("--calibration", required=True, type=Path, help=f"a directory holding {CALIBRATION_FILE}")
    parser.add_argument("--out", required=True, type=Path, help="the scales file to write (safetensors)")
    parser.add_argument("--samples", type=int, default=SAMPLES, help="calibration lines used (the first ones)")
    parser.add_argument("--tokens", type=int, default=TOKENS, help="tokens of each sample (its first ones)")
    parser.add_argument("--rows", type=int, default=ROWS, help="input rows per group the search's error uses")
    args = parser.parse_args(argv)
    if min(args.samples, args.tokens, args.rows) < 1:
        parser.error("--samples, --tokens and --rows: at least 1")
    evaluate, quantize = _sibling("evaluate"), _sibling("quantize")
    try:  # before the model is loaded: the checkpoint as the conversion will take it, and the data
        quantize.checkpoint_config(Path(args.checkpoint))
        texts = evaluate.read_jsonl(args.calibration / CALIBRATION_FILE, ("text",))[: args.samples]
    except (quantize.BadCheckpoint, evaluate.BadEvaluationData) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    model, encode = load(args.checkpoint)
    samples = [ids[: args.tokens] for ids in (encode(row["text"]) for row in texts) if ids]
    if not samples:
        print(f"error: {args.calibration / CALIBRATION_FILE}: no text encodes to a token", file=sys.stderr)
        return 2
    try:
        found = groups(model)
    except ValueError as error:
        print(f"error: {args.checkpoint}: {error}", file=sys.stderr)
        return 2
    if not found:
        print(f"error: {args.checkpoint}: no decoder layer with Llama's module names", file=sys.stderr)
        return 2
    scales = search(model, found, samples, args.rows)
    write(scales, args.out)
    report = {
        "groups": len(scales),
        "samples": len(samples),
        "tokens": sum(map(len, samples)),
        "error": sum(f["error"] for _, f in scales.values()),
        "roundToNearestError": sum(f["roundToNearestError"] for _, f in scales.values()),
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
