"""The artefact variants a model is served as, as data: the bf16 builds and the quantised ones (pure).

A variant names how its artefact is made (method), the number formats it is served at (a named precision of
infra/catalog/data/accelerators.json: weights, activations, KV cache), the kernel the server runs it with and
that kernel's minimum CUDA compute capability, and how the server is told to load it (vLLM's --quantization,
or NxD Inference's override_neuron_config on Neuron). Which pools can serve a variant is computed from the
device facts, never listed by name: a pool serves it when every device its types carry computes in the
precision's activation format, holds weights and KV cache in its formats and meets the kernel's capability.
The config check and `promote` refuse a variant on a pool that cannot, naming the pools that can.

Sources (re-read 2026-12-02 at vLLM 0.33.0, the CUDA image's): each compressed-tensors scheme class's
get_min_capability(), called in the release wheel (tests/contracts/data/vllm/vllm-0.33.0.json,
schemeMinCapability): CompressedTensorsW8A8Int8 75 ("turing and up"), CompressedTensorsWNA16 75 (Marlin takes
Turing at 0.33.0; it needed Ampere, 80, at 0.9.1; Machete on Hopper), CompressedTensorsW8A8Fp8 89 (fp8 tensor
cores, Ada Lovelace and Hopper; below it vLLM falls back to weight-only W8A16, which is not W8A8); --quantization's
values, the release's QUANTIZATION_METHODS. All three CUDA quantised variants are compressed-tensors artefacts
(tests/contracts/data/compressed_tensors.json), written by llm-compressor (recipes.py, compress.py): cuda-fp8
rounds to nearest, cuda-int8 (SmoothQuant, GPTQ) and cuda-int4 (AWQ) read the calibration data of the promotion
(`calibrated`: promote requires --calibration-data for them). NxD Inference's NeuronConfig `quantized`,
`quantization_type`, `quantization_dtype`, `modules_to_not_convert`, `quantized_checkpoints_path`
(neuronx-distributed-inference v0.5.9230, the Neuron SDK 2.25 image's; tests/contracts/data/nxd_inference.json):
int8 weight-only on Inferentia2, per output channel, symmetric (scale = max|w| / 127), computed in bf16; built by
NxD Inference's own quantiser (recipes.py, neuron_quantize.py). Only a real accelerator confirms that a built
artefact loads.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from infra.catalog.accelerators import Device, Precision, device, precision
from infra.serving.families import FAMILIES, ServingFamily

Kind = Literal["gpu", "neuron"]


@dataclass(frozen=True)
class VariantFacts:
    name: str
    kind: Kind  # the device kind it runs on
    method: str  # how the artefact is made
    precisions: tuple[str, ...]  # named precisions it is served at, the first by default
    kernel: str  # what computes with it on the device
    min_compute_capability: float | None  # the kernel's minimum CUDA compute capability
    quantization: str | None  # vLLM --quantization; None: unquantised (or configured through Neuron overrides)
    neuron_quantization: dict[str, Any] | None  # NxD Inference NeuronConfig keys (override_neuron_config)
    calibrated: bool  # whether building it reads calibration data (datasets/calibration/...)

    @property
    def quantised(self) -> bool:
        return self.precisions[0] not in ("bf16", "fp16")

    @property
    def precision(self) -> Precision:
        return precision(self.precisions[0])


VARIANTS: dict[str, VariantFacts] = {
    facts.name: facts
    for facts in (
        VariantFacts(
            "neuron", "neuron", "NxD Inference compile, bf16", ("bf16",), "NxD Inference", None, None, None, False
        ),
        VariantFacts("cuda", "gpu", "bf16 safetensors re-save", ("bf16", "fp16"), "vLLM CUDA", None, None, None, False),
        VariantFacts(
            "cuda-fp8",
            "gpu",
            "W8A8 FP8 (llm-compressor): per-channel fp8 (e4m3) weights, dynamic per-token fp8 activations "
            "(compressed-tensors float-quantized, the FP8_DYNAMIC scheme)",
            ("fp8",),
            "CUTLASS fp8 scaled_mm",
            8.9,
            "compressed-tensors",
            None,
            False,
        ),
        VariantFacts(
            "cuda-int4",
            "gpu",
            "W4A16 AWQ (llm-compressor): activation-aware scales searched on calibration data and folded into the "
            "preceding norms and projections, then symmetric int4 weights in groups of 128, fp16 compute "
            "(compressed-tensors pack-quantized)",
            ("int4",),
            "Marlin/Machete (CompressedTensorsWNA16)",
            7.5,
            "compressed-tensors",
            None,
            True,
        ),
        VariantFacts(
            "cuda-int8",
            "gpu",
            "W8A8 INT8 (llm-compressor): SmoothQuant (strength 0.8) on calibration data, then per-channel int8 "
            "weights by GPTQ, dynamic per-token int8 activations (compressed-tensors int-quantized)",
            ("int8",),
            "CUTLASS int8 scaled_mm",
            7.5,
            "compressed-tensors",
            None,
            True,
        ),
        VariantFacts(
            "neuron-int8",
            "neuron",
            "INT8 weight-only, per-channel symmetric (NxD Inference quantized checkpoint), bf16 compute",
            ("w8a16",),
            "NxD Inference",
            None,
            None,
            # lm_head stays bf16, as in the CUDA variants (`ignore: [lm_head]`); engine.py adds the path of the
            # quantized checkpoint (quantized_checkpoints_path), which NeuronConfig requires with `quantized`.
            {
                "quantized": True,
                "quantization_type": "per_channel_symmetric",
                "quantization_dtype": "int8",
                "modules_to_not_convert": ["lm_head"],
            },
            False,
        ),
    )
}
VARIANT_NAMES = tuple(VARIANTS)


def facts(variant: str) -> VariantFacts:
    return VARIANTS[variant]


def device_refusal(found: Device, variant: VariantFacts) -> str | None:
    """Why `found` cannot serve any of the variant's precisions (the default's reason), or None."""
    reasons = [found.unsupported(precision(name)) for name in variant.precisions]
    if all(reasons):
        return reasons[0]
    need = variant.min_compute_capability
    if need is not None and (found.compute_capability or 0) < need:
        return (
            f"{found.name} ({found.architecture}) has compute capability {found.compute_capability or 'none'}; "
            f"{variant.kernel} needs {need}"
        )
    return None


def hardware_refusal(variant: str, pool: str) -> str | None:
    """Why pool `pool` cannot serve `variant` (its kind or a device's formats/capability), or None."""
    wanted = VARIANTS[variant]
    family = FAMILIES[pool]
    kind: Kind = "neuron" if family.neuron else "gpu"
    if wanted.kind != kind:
        return family.variant_reason
    for name in family.devices:
        why = device_refusal(device(name), wanted)
        if why:
            return f"{variant} ({precision_label(wanted.precision)}) needs what {pool} lacks: {why}"
    return None


def pools_for(variant: str) -> tuple[str, ...]:
    """Every pool family (both clouds) whose devices can serve `variant`, in table order."""
    return tuple(name for name in FAMILIES if hardware_refusal(variant, name) is None)


def variants_for(pool: str) -> tuple[str, ...]:
    """Every variant a pool's devices can serve, its default first."""
    return tuple(name for name in VARIANTS if hardware_refusal(name, pool) is None)


def describe_pools(pools: tuple[str, ...]) -> str:
    """`g6 (L4), g6e (L40S), l4 (gcp L4)`."""
    return ", ".join(_pool_label(FAMILIES[p]) for p in pools) or "none"


def _pool_label(family: ServingFamily) -> str:
    cloud = "gcp " if family.cloud == "gcp" else ""
    return f"{family.name} ({cloud}{'/'.join(family.devices)})"


def precision_label(found: Precision) -> str:
    """`weights int4, activations fp16, KV cache fp16`."""
    return f"weights {found.weights}, activations {found.activations}, KV cache {found.kv_cache}"


def variant_problem(variant: str, pool: str) -> str | None:
    """The config's and promote's message for a variant its pool cannot serve, naming the pools that can."""
    why = hardware_refusal(variant, pool)
    if why is None:
        return None
    if VARIANTS[variant].kind != ("neuron" if FAMILIES[pool].neuron else "gpu"):
        return f"{variant} artefacts cannot be served on {pool}: {why}; use {', '.join(variants_for(pool))}"
    return (
        f"{variant} artefacts cannot be served on {pool}: {why}; pools that can: {describe_pools(pools_for(variant))}"
    )


def serving_refusal(found: Device, precision_name: str) -> str | None:
    """Why no variant of mlinfra serves `precision_name` on `found` (the sizing's check), or None."""
    kind: Kind = "neuron" if found.kind == "neuron" else "gpu"
    serving = [v for v in VARIANTS.values() if v.kind == kind and precision_name in v.precisions]
    if not serving:
        return f"no variant of mlinfra serves {precision_name} on {kind} devices"
    reasons = [device_refusal(found, replace(v, precisions=(precision_name,))) for v in serving]
    return reasons[0] if all(reasons) else None
