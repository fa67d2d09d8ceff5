"""Post-training quantisation of a causal language model's linear layers, in pure torch (a program the quality
gate's tests run for real on CPU; standard library and torch only, like the fabric gate's program).

Methods (each names the variant it stands for, infra/serving/variants.py):
  int8-weight-only  per-output-channel symmetric int8 weights, round to nearest (neuron-int8)
  int8              W8A8: the same weights, and activations quantised per token to int8 at run time (cuda-int8)
  int4              group-wise (`group` input channels) symmetric int4 weights, round to nearest
  int4-awq          int4 as above after an activation-aware scale search (AWQ): input channel j of a layer is
                    scaled by s_j = mean|x_j| ** alpha before quantising (and x_j divided by it), alpha in
                    0, 0.05, ..., 1 chosen per layer for the least output error on the calibration data (cuda-int4)
  fp8               W8A8 FP8: per-output-channel e4m3 weights (scale = max|w| / 448) and per-token e4m3
                    activations, through torch.float8_e4m3fn (cuda-fp8)
Compute stays in the model's float dtype (here fp32): the numbers are the quantised ones, the kernels are not.

`scale_error` multiplies every scale after it is chosen: 1 is correct; anything else builds a deliberately
broken variant (too small a scale clips the weights), which the quality gate must refuse.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

METHODS = ("int8-weight-only", "int8", "int4", "int4-awq", "fp8")
WEIGHT_BITS = {"int8-weight-only": 8, "int8": 8, "int4": 4, "int4-awq": 4, "fp8": 8}
ACTIVATIONS = {"int8": "int8", "fp8": "fp8"}  # W8A8 methods; the others keep 16-bit activations
FP8_MAX = 448.0  # largest finite float8 e4m3fn
AWQ_GRID = tuple(i / 20 for i in range(21))
SCALE_BYTES = 2  # scales are stored in 16 bits


def int8_weights(w: torch.Tensor, scale_error: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-output-channel symmetric int8: (int8 values, scale per row)."""
    scale = (w.abs().amax(dim=1, keepdim=True).clamp(min=1e-8) / 127.0) * scale_error
    return torch.clamp(torch.round(w / scale), -128, 127).to(torch.int8), scale


def int4_weights(w: torch.Tensor, group: int, scale_error: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Group-wise symmetric int4 in [-8, 7] (held in int8): (values shaped like w, scale per row and group)."""
    rows, cols = w.shape
    if cols % group:
        raise ValueError(f"{cols} input channels are not a multiple of the group size {group}")
    grouped = w.reshape(rows, cols // group, group)
    scale = (grouped.abs().amax(dim=2, keepdim=True).clamp(min=1e-8) / 7.0) * scale_error
    values = torch.clamp(torch.round(grouped / scale), -8, 7)
    return values.reshape(rows, cols).to(torch.int8), scale


def fp8_weights(w: torch.Tensor, scale_error: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-output-channel float8 e4m3: (float8 values, scale per row)."""
    scale = (w.abs().amax(dim=1, keepdim=True).clamp(min=1e-8) / FP8_MAX) * scale_error
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
    w = layer.weight.detach()
    reference = x @ w.T
    importance = x.abs().mean(dim=0).clamp(min=1e-6)
    best: tuple[float, torch.Tensor, float] | None = None
    for alpha in AWQ_GRID:
        s = importance**alpha
        s = s / (s.max() * s.min()).sqrt()  # centred around 1, as AWQ does
        values, scale = int4_weights(w * s, group)
        error = ((x / s) @ dequantise(values, scale, group).T - reference).pow(2).mean().item()
        if best is None or error < best[0]:
            best = (error, s, alpha)
    assert best is not None
    return best[1], best[2]


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
