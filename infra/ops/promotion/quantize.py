"""Post-training quantisation of a causal language model's linear layers, in pure torch (a program the quality
gate's tests run for real on CPU; standard library and torch only, like the fabric gate's program), and the
conversion of a Hugging Face safetensors checkpoint into a compressed-tensors artefact with the same weight
quantisers (`python3 quantize.py convert ...`, the cuda-fp8/-int8/-int4 conversion Jobs; that path also needs
safetensors, which the vLLM image has), folding in AWQ's scales first when given them (`--scales`, awq.py).

Methods (each names the variant it stands for, infra/serving/variants.py):
  int8-weight-only  per-output-channel symmetric int8 weights, round to nearest (neuron-int8)
  int8              W8A8: the same weights, and activations quantised per token to int8 at run time (cuda-int8)
  int4              group-wise (`group` input channels) symmetric int4 weights, round to nearest (the
                    conversion's int4, group 128; cuda-int4 folds AWQ's scales in first: convert --scales)
  int4-awq          int4 as above after an activation-aware scale search (AWQ, awq.awq_search): input channel j of
                    a layer is scaled by s_j = mean|x_j| ** alpha before quantising (and x_j divided by it),
                    alpha in 0, 0.05, ..., 1 chosen per layer for the least output error on the calibration
                    data (the cuda-int4 Job searches per group of layers sharing an input instead: awq.py)
  fp8               W8A8 FP8: per-output-channel e4m3 weights (scale = max|w| / 448) and per-token e4m3
                    activations, through torch.float8_e4m3fn (cuda-fp8)
Compute stays in the model's float dtype (here fp32): the numbers are the quantised ones, the kernels are not.

`scale_error` multiplies every scale after it is chosen: 1 is correct; anything else builds a deliberately
broken variant (too small a scale clips the weights), which the quality gate must refuse. `scale_dtype` rounds
the scale to the dtype it is stored in before the weights are divided by it, so stored values and stored scale
agree exactly.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

METHODS = ("int8-weight-only", "int8", "int4", "int4-awq", "fp8")
WEIGHT_BITS = {"int8-weight-only": 8, "int8": 8, "int4": 4, "int4-awq": 4, "fp8": 8}
ACTIVATIONS = {"int8": "int8", "fp8": "fp8"}  # W8A8 methods; the others keep 16-bit activations
FP8_MAX = 448.0  # largest finite float8 e4m3fn
SCALE_BYTES = 2  # scales are stored in 16 bits


def _stored(scale: torch.Tensor, scale_dtype: torch.dtype | None) -> torch.Tensor:
    """The scale as it is stored (rounded to `scale_dtype`, never below its smallest normal), back in fp32."""
    if scale_dtype is None:
        return scale
    return scale.to(scale_dtype).clamp(min=torch.finfo(scale_dtype).tiny).to(torch.float32)


def int8_weights(
    w: torch.Tensor, scale_error: float = 1.0, scale_dtype: torch.dtype | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-output-channel symmetric int8: (int8 values, scale per row)."""
    scale = _stored((w.abs().amax(dim=1, keepdim=True).clamp(min=1e-8) / 127.0) * scale_error, scale_dtype)
    return torch.clamp(torch.round(w / scale), -128, 127).to(torch.int8), scale


def int4_weights(
    w: torch.Tensor, group: int, scale_error: float = 1.0, scale_dtype: torch.dtype | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Group-wise symmetric int4 in [-8, 7] (held in int8): (values shaped like w, scale per row and group)."""
    rows, cols = w.shape
    if cols % group:
        raise ValueError(f"{cols} input channels are not a multiple of the group size {group}")
    grouped = w.reshape(rows, cols // group, group)
    scale = _stored((grouped.abs().amax(dim=2, keepdim=True).clamp(min=1e-8) / 7.0) * scale_error, scale_dtype)
    values = torch.clamp(torch.round(grouped / scale), -8, 7)
    return values.reshape(rows, cols).to(torch.int8), scale


def fp8_weights(
    w: torch.Tensor, scale_error: float = 1.0, scale_dtype: torch.dtype | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-output-channel float8 e4m3: (float8 values, scale per row)."""
    scale = _stored((w.abs().amax(dim=1, keepdim=True).clamp(min=1e-8) / FP8_MAX) * scale_error, scale_dtype)
    return torch.clamp(w / scale, -FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale


def dequantise(values: torch.Tensor, scale: torch.Tensor, group: int | None = None) -> torch.Tensor:
    if group is None:
        return values.to(torch.float32) * scale
    rows, cols = values.shape
    return (values.to(torch.float32).reshape(rows, cols // group, group) * scale).reshape(rows, cols)


def quantise_activations(x: torch.Tensor, kind: str) -> torch.Tensor:
    """Dynamic per-token quantisation of a layer's input (quantised and back)."""
    if kind == "int8":
        scale = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-8) / 127.0
        return torch.clamp(torch.round(x / scale), -128, 127) * scale
    scale = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-8) / FP8_MAX
    return (x / scale).to(torch.float8_e4m3fn).to(x.dtype) * scale


class QuantisedLinear(nn.Module):
    """A linear layer whose weights are held quantised (and its input quantised per token for W8A8)."""

    def __init__(
        self,
        values: torch.Tensor,
        scale: torch.Tensor,
        bias: torch.Tensor | None,
        group: int | None,
        activations: str | None,
        input_scale: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        self.register_buffer("values", values)
        self.register_buffer("scale", scale.to(torch.float16).to(torch.float32))  # stored in 16 bits
        self.register_buffer("input_scale", input_scale)  # AWQ: x / s before the layer, folded in
        self.bias = None if bias is None else nn.Parameter(bias.detach().clone(), requires_grad=False)
        self.group = group
        self.activations = activations

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.input_scale is not None:
            x = x / self.input_scale
        if self.activations is not None:
            x = quantise_activations(x, self.activations)
        return nn.functional.linear(x, dequantise(self.values, self.scale, self.group), self.bias)


@dataclass(frozen=True)
class QuantisationReport:
    method: str
    layers: int
    parameters: int  # weights of the quantised layers
    weight_bytes: float  # their bytes after quantisation, scales included
    bf16_bytes: int  # the same weights in bf16
    awq_alphas: dict[str, float]

    @property
    def bytes_per_weight(self) -> float:
        return self.weight_bytes / max(1, self.parameters)

    def as_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "layers": self.layers,
            "parameters": self.parameters,
            "weightBytes": round(self.weight_bytes),
            "bf16Bytes": self.bf16_bytes,
            "bytesPerWeight": round(self.bytes_per_weight, 4),
            **({"awqAlphas": self.awq_alphas} if self.awq_alphas else {}),
        }


def _layer_inputs(model: nn.Module, names: Sequence[str], batches: Iterable[torch.Tensor]) -> dict[str, torch.Tensor]:
    """Every input row each named linear layer sees on the calibration batches."""
    seen: dict[str, list[torch.Tensor]] = {name: [] for name in names}
    modules = dict(model.named_modules())
    hooks = [
        modules[name].register_forward_hook(
            lambda _m, args, _out, name=name: seen[name].append(args[0].detach().reshape(-1, args[0].shape[-1]))
        )
        for name in names
    ]
    try:
        with torch.no_grad():
            for batch in batches:
                model(batch)
    finally:
        for hook in hooks:
            hook.remove()
    return {name: torch.cat(rows) for name, rows in seen.items()}


def _awq_scales(layer: nn.Linear, x: torch.Tensor, group: int) -> tuple[torch.Tensor, float]:
    """The per-input-channel scale (and its alpha) that least changes the layer's output once quantised."""
    # awq.py: this package's module, or the file beside this one (as awq.py finds this one)
    awq = importlib.import_module(f"{__package__}.awq" if __package__ else "awq")
    found = awq.awq_search([layer.weight.detach()], x, x.abs().mean(dim=0), group)
    return found.s, found.alpha


def quantise_model(
    model: nn.Module,
    method: str,
    calibration: Sequence[torch.Tensor] = (),
    group: int = 32,
    skip: tuple[str, ...] = ("lm_head",),
    scale_error: float = 1.0,
) -> QuantisationReport:
    """Replace every nn.Linear of `model` (but those named in `skip`) by its quantised form, in place."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; one of {', '.join(METHODS)}")
    names = [n for n, m in model.named_modules() if isinstance(m, nn.Linear) and n.split(".")[-1] not in skip]
    if method == "int4-awq" and not calibration:
        raise ValueError("int4-awq needs calibration batches")
    inputs = _layer_inputs(model, names, calibration) if method == "int4-awq" else {}
    modules = dict(model.named_modules())
    parameters, weight_bytes, alphas = 0, 0.0, {}
    for name in names:
        layer = modules[name]
        assert isinstance(layer, nn.Linear)
        w = layer.weight.detach()
        input_scale, grouping = None, None
        if method in ("int8-weight-only", "int8"):
            values, scale = int8_weights(w, scale_error)
        elif method == "fp8":
            values, scale = fp8_weights(w, scale_error)
        else:
            grouping = group
            if method == "int4-awq":
                input_scale, alphas[name] = _awq_scales(layer, inputs[name], group)
                w = w * input_scale
            values, scale = int4_weights(w, group, scale_error)
        replacement = QuantisedLinear(values, scale, layer.bias, grouping, ACTIVATIONS.get(method), input_scale)
        parent_name, _, child = name.rpartition(".")
        setattr(modules[parent_name] if parent_name else model, child, replacement)
        parameters += w.numel()
        weight_bytes += w.numel() * WEIGHT_BITS[method] / 8 + scale.numel() * SCALE_BYTES
    return QuantisationReport(method, len(names), parameters, weight_bytes, parameters * 2, alphas)


# --- the conversion: python3 quantize.py convert --scheme fp8|int8|int4 --checkpoint DIR --out DIR ---------------
# A Hugging Face checkpoint (config.json, *.safetensors) becomes a compressed-tensors artefact that vLLM loads
# natively (config.json `quantization_config`, quant_method compressed-tensors), read and written one tensor at a
# time: at most one shard of output (SHARD_BYTES) and one layer's weights in fp32 are in memory, never the model.
# The format (field names, dtypes, packing order) is compressed-tensors' at the versions vLLM 0.8.5 (0.9.3) and
# 0.9.1 (0.10.1) pin; tests/contracts/data/compressed_tensors.json records what was checked, and where.
CONVERT_GROUP = 128  # int4 group size: W4A16 (llm-compressor's preset); Marlin takes 32, 64, 128 or channel
SHARD_BYTES = 2 << 30
ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM")  # every 2-D weight a Linear's
NOT_LINEAR = ("embed_tokens.weight", "lm_head.weight")  # 2-D weights that stay as they are
WEIGHT_FILES = (".safetensors", ".bin", ".pt", ".pth")
CONVERTED = ("config.json", "model.safetensors.index.json")  # written anew


def _args(bits: int, kind: str, strategy: str, group: int | None = None, dynamic: bool = False) -> dict[str, Any]:
    """compressed-tensors' QuantizationArgs as its model validator completes them (observer by dynamic)."""
    return {
        "num_bits": bits,
        "type": kind,
        "symmetric": True,
        "group_size": group,
        "strategy": strategy,
        "block_structure": None,
        "dynamic": dynamic,
        "actorder": None,
        "observer": None if dynamic else "minmax",
        "observer_kwargs": {},
    }


@dataclass(frozen=True)
class Scheme:
    format: str  # compressed-tensors CompressionFormat
    weights: dict[str, Any]
    input_activations: dict[str, Any] | None


SCHEMES = {  # llm-compressor's presets FP8_DYNAMIC, INT8_W8A8 and W4A16, by the variant they build
    "fp8": Scheme("float-quantized", _args(8, "float", "channel"), _args(8, "float", "token", dynamic=True)),
    "int8": Scheme("int-quantized", _args(8, "int", "channel"), _args(8, "int", "token", dynamic=True)),
    "int4": Scheme("pack-quantized", _args(4, "int", "group", CONVERT_GROUP), None),
}


class BadCheckpoint(ValueError):
    pass


def _written_args(args: dict[str, Any] | None) -> dict[str, Any] | None:
    """QuantizationArgs as compressed-tensors 0.17 writes them: scale and zero-point dtypes unset (the library's
    default, the layer's own)."""
    return None if args is None else {**args, "scale_dtype": None, "zp_dtype": None}


def quantization_config(scheme: str) -> dict[str, Any]:
    """config.json's `quantization_config` for `scheme`: every Linear layer but lm_head."""
    found = SCHEMES[scheme]
    group = {
        "targets": ["Linear"],
        "weights": _written_args(found.weights),
        "input_activations": _written_args(found.input_activations),
        "format": None,  # the scheme's own format: none, the block's applies
    }
    return {
        "quant_method": "compressed-tensors",
        "format": found.format,
        "quantization_status": "compressed",
        "config_groups": {"group_0": {**group, "output_activations": None}},
        "ignore": ["lm_head"],
        "kv_cache_scheme": None,
        "global_compression_ratio": None,
    }


def pack_int4(values: torch.Tensor) -> torch.Tensor:
    """int4 values in [-8, 7] (int8, columns a multiple of 8) -> int32, eight per word: column 8k + i, offset by
    8 to 0..15, in bits 4i..4i+3 of word k (compressed-tensors' pack_to_int32)."""
    rows, cols = values.shape
    nibbles = (values.to(torch.int64) + 8).reshape(rows, cols // 8, 8)
    packed = torch.zeros(rows, cols // 8, dtype=torch.int64)
    for i in range(8):
        packed |= nibbles[:, :, i] << (4 * i)
    return torch.where(packed >= 1 << 31, packed - (1 << 32), packed).to(torch.int32)


def compressed(name: str, weight: torch.Tensor, scheme: str) -> dict[str, torch.Tensor]:
    """The artefact's tensors for one Linear weight (`<layer>.weight`)."""
    layer, w = name[: -len("weight")], weight.to(torch.float32)
    if scheme == "int4":
        if w.shape[1] % CONVERT_GROUP:
            raise BadCheckpoint(f"{name}: {w.shape[1]} input channels are not a multiple of {CONVERT_GROUP}")
        values, scale = int4_weights(w, CONVERT_GROUP, scale_dtype=torch.float16)
        return {
            layer + "weight_packed": pack_int4(values),
            layer + "weight_scale": scale.reshape(w.shape[0], -1).to(torch.float16),  # the server runs float16
            layer + "weight_shape": torch.tensor(list(w.shape), dtype=torch.int64),
        }
    values, scale = (fp8_weights if scheme == "fp8" else int8_weights)(w, scale_dtype=torch.float32)
    return {layer + "weight": values, layer + "weight_scale": scale}  # scale (rows, 1), fp32 as vLLM's


def _linear(name: str, tensor: torch.Tensor) -> bool:
    return tensor.dim() == 2 and name.endswith(".weight") and not name.endswith(NOT_LINEAR)


def _shards(checkpoint: Path) -> list[Path]:
    index = checkpoint / "model.safetensors.index.json"
    if index.is_file():
        return [
            checkpoint / f for f in sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        ]
    found = sorted(checkpoint.glob("*.safetensors"))
    if not found:
        raise BadCheckpoint(f"{checkpoint}: no *.safetensors (the conversion reads safetensors checkpoints only)")
    return found


def checkpoint_config(checkpoint: Path) -> dict[str, Any]:
    path = checkpoint / "config.json"
    if not path.is_file():
        raise BadCheckpoint(f"{path}: no such file")
    config: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    architectures = config.get("architectures") or []
    if not any(a in ARCHITECTURES for a in architectures):
        raise BadCheckpoint(f"{path}: architectures {architectures}; the conversion knows {', '.join(ARCHITECTURES)}")
    if "quantization_config" in config:
        raise BadCheckpoint(f"{path}: the checkpoint is already quantised ({config['quantization_config']})")
    return config


# AWQ's scales (awq.py writes them: one vector s per scaled group, named by the tensor s divides) are folded
# exactly as each tensor streams by: the tensors of `divides` (the norm's weight, or the preceding linear's
# weight rows and bias) by s along their first dimension, the input columns of `multiplies` (the linears that
# read that output) times s; the folded model computes what the checkpoint computes (x / s times W * s).
SCALES_METADATA = "mlinfra.awq"


@dataclass(frozen=True)
class Folding:
    divide: dict[str, torch.Tensor]  # tensor -> s: divided along its first dimension
    multiply: dict[str, torch.Tensor]  # linear weight -> s: its input columns multiplied

    def apply(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        """The tensor with its scales folded, in fp32 (as it was when no scale names it)."""
        if name not in self.divide and name not in self.multiply:
            return tensor
        w = tensor.to(torch.float32)
        if name in self.divide:
            s = self.divide[name]
            if w.shape[0] != s.numel():
                raise BadCheckpoint(f"{name}: {w.shape[0]} rows, but its AWQ scale has {s.numel()}")
            w = w / s.reshape(-1, *([1] * (w.dim() - 1)))
        if name in self.multiply:
            s = self.multiply[name]
            if w.dim() != 2 or w.shape[1] != s.numel():
                raise BadCheckpoint(f"{name}: shape {list(w.shape)}, but its AWQ scale has {s.numel()} columns")
            w = w * s
        return w

    def names(self) -> set[str]:
        return set(self.divide) | set(self.multiply)


def read_scales(path: Path) -> Folding:
    """The scales file of awq.py: a safetensors file, one fp32 vector per group, and in its metadata per vector
    the tensors it divides and multiplies."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt", device="cpu") as handle:
            groups = json.loads((handle.metadata() or {})[SCALES_METADATA])
            vectors = {name: handle.get_tensor(name).to(torch.float32) for name in groups}
        divide = {t: vectors[n] for n, g in groups.items() for t in g["divides"]}
        multiply = {t: vectors[n] for n, g in groups.items() for t in g["multiplies"]}
    # missing (OSError), not safetensors (safetensors' SafetensorError, an Exception), no or other metadata: all
    # of them a bad --scales file
    except Exception as error:
        raise BadCheckpoint(f"{path}: not an AWQ scales file of awq.py ({type(error).__name__}: {error})") from None
    return Folding(divide, multiply)


def convert(
    checkpoint: Path, out: Path, scheme: str, shard_bytes: int = SHARD_BYTES, folding: Folding | None = None
) -> dict[str, Any]:
    """Write the artefact to `out` (which exists); returns what was done (layers, parameters, bytes, files)."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    config, shards = checkpoint_config(checkpoint), _shards(checkpoint)
    pending: dict[str, torch.Tensor] = {}
    written: list[tuple[Path, list[str]]] = []
    layers = parameters = total = pending_bytes = 0
    unfolded = folding.names() if folding is not None else set()

    def flush() -> None:
        path = out / f".part-{len(written) + 1:05d}.safetensors"
        save_file({k: v.contiguous() for k, v in pending.items()}, str(path), metadata={"format": "pt"})
        written.append((path, list(pending)))
        pending.clear()

    for shard in shards:
        with safe_open(str(shard), framework="pt", device="cpu") as source:
            for name in source.keys():
                tensor = source.get_tensor(name)
                linear = _linear(name, tensor)
                if folding is not None:
                    folded = folding.apply(name, tensor)
                    tensor, unfolded = (folded if linear else folded.to(tensor.dtype)), unfolded - {name}
                    if name in folding.multiply and not linear:
                        raise BadCheckpoint(f"{name}: an AWQ scale multiplies it, but it is not a quantised linear")
                tensors = compressed(name, tensor, scheme) if linear else {name: tensor}
                layers, parameters = layers + linear, parameters + (tensor.numel() if linear else 0)
                pending.update(tensors)
                size = sum(value.numel() * value.element_size() for value in tensors.values())
                total, pending_bytes = total + size, pending_bytes + size
                if pending_bytes >= shard_bytes:
                    flush()
                    pending_bytes = 0
    if unfolded:
        raise BadCheckpoint(f"the checkpoint has no {', '.join(sorted(unfolded))}, which the AWQ scales name")
    if pending or not written:
        flush()
    weight_map = {}
    for number, (path, names) in enumerate(written, 1):
        final = f"model-{number:05d}-of-{len(written):05d}.safetensors"
        path.rename(out / final)
        weight_map.update(dict.fromkeys(names, final))
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    (out / "config.json").write_text(
        json.dumps({**config, "quantization_config": quantization_config(scheme)}), encoding="utf-8"
    )
    for path in sorted(checkpoint.iterdir()):  # tokenizer, generation config, ...: as they are
        if path.is_file() and not path.name.endswith(WEIGHT_FILES) and path.name not in CONVERTED:
            shutil.copyfile(path, out / path.name)
    awq = {"awqScales": len(folding.names())} if folding is not None else {}
    return {"scheme": scheme, "layers": layers, "parameters": parameters, "bytes": total, "files": len(written)} | awq


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="a safetensors checkpoint -> a compressed-tensors artefact")
    parser.add_argument("command", choices=["convert"])
    parser.add_argument("--scheme", required=True, choices=sorted(SCHEMES))
    parser.add_argument("--checkpoint", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--shard-bytes", type=int, default=SHARD_BYTES)
    parser.add_argument("--scales", type=Path, help="int4: AWQ scales to fold in first (awq.py); else round to nearest")
    args = parser.parse_args(argv)
    if args.scales is not None and args.scheme != "int4":
        parser.error("--scales: AWQ scales are searched for int4 weights (--scheme int4) only")
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        folding = read_scales(args.scales) if args.scales is not None else None
        report = convert(args.checkpoint, args.out, args.scheme, args.shard_bytes, folding)
    except BadCheckpoint as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
