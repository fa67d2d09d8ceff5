"""The vLLM engine settings of one model, in one place: the server's command line and the engine a promotion
Job builds (the Neuron compile, the load-and-generate smoke test) both come from here, so an artefact is
compiled and tested for exactly the shape it is served with (pure).

On Neuron the shape is compiled in: the vllm-neuron plugin (0.5, in the Neuron DLC for vLLM 0.16.0) builds its NxD
Inference config from tensor_parallel_size (tp_degree), max_num_seqs (batch_size) and max_model_len (seq_len,
max_context_length), updated by additional_config's `override_neuron_config`, and an artefact compiled for other
values fails to load. The plugin needs prefix caching off (then its KV cache is contiguous, one block of
max_model_len per sequence) and num_gpu_blocks_override equal to max_num_seqs (its known issues, SDK 2.31.1).

A neuron-int8 artefact also holds NxD Inference's quantized checkpoint (NEURON_QUANTIZED_DIR). NxD Inference's
NeuronConfig asserts `quantized_checkpoints_path` whenever `quantized` is set, and it is an absolute path: the
settings name it where the artefact is seen (`artefact_dir`: the server's MODEL_DIR; the conversion Job's
/work/out while it builds it, /served while it checks it), as NEURON_COMPILED_ARTIFACTS is set per step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from infra.catalog.accelerators import Precision, device, precision
from infra.serving.families import FAMILIES
from infra.serving.spec import ModelSpec
from infra.serving.variants import VARIANTS

DTYPE = "bfloat16"  # the Neuron artefact's (promotion compiles it in bf16)
# vLLM's --dtype of a precision's 16-bit activation format; 8- and 4-bit precisions compute in the 16-bit
# format of their checkpoint, named by their variant's quantisation.
DTYPES = {"bf16": "bfloat16", "fp16": "float16"}
# Weights pre-sharded into the compiled artefact: a replica loads them as they are instead of sharding the
# checkpoint on every start (NxD Inference's save_sharded_checkpoint).
NEURON_OVERRIDES: dict[str, Any] = {"save_sharded_checkpoint": True}
# The Neuron artefact: the Hugging Face files (config, tokenizer) at its root, NxD Inference's compiled
# model (graphs and sharded weights) here, named to the server by NEURON_COMPILED_ARTIFACTS.
NEURON_COMPILED_DIR = "neuron-compiled"
# neuron-int8: NxD Inference's quantized checkpoint (int8 `weight` + fp32 `scale` per quantised layer, safetensors),
# written by its save_quantized_state_dict before the compile, which reads it (tests/contracts/data/nxd_inference.json).
NEURON_QUANTIZED_DIR = "neuron-quantized"
MODEL_DIR = "/models"  # where the model server sees its artefact (servers.py mounts it there)
DEFAULT_MAX_NUM_SEQS = {name: f.default_max_num_seqs for name, f in FAMILIES.items()}


def tensor_parallel_size(model: ModelSpec) -> int:
    """vLLM shards over GPUs, and over NeuronCores on inf2 (2 per Inferentia2 device)."""
    return model.accelerators_per_replica * (2 if FAMILIES[model.accelerator].neuron else 1)


def precision_of(model: ModelSpec) -> Precision:
    """The entry's precision, else its quantised variant's, else its pool's 16-bit default: bf16, or fp16 on a
    device without bf16 (T4)."""
    if model.precision:
        return precision(model.precision)
    variant = VARIANTS[model.artefact_variant]
    if variant.quantised:
        return variant.precision
    found = device(FAMILIES[model.accelerator].devices[0])
    return precision("bf16" if "bf16" in found.compute_formats else "fp16")


def dtype(model: ModelSpec) -> str:
    """vLLM's --dtype: the precision's 16-bit activations, else the device's 16-bit format."""
    activations = precision_of(model).activations
    if activations in DTYPES:
        return DTYPES[activations]
    found = device(FAMILIES[model.accelerator].devices[0])
    return DTYPES["bf16" if "bf16" in found.compute_formats else "fp16"]


def max_num_seqs(model: ModelSpec) -> int:
    return model.max_num_seqs or DEFAULT_MAX_NUM_SEQS[model.accelerator]


@dataclass(frozen=True)
class EngineSettings:
    tensor_parallel_size: int
    max_num_seqs: int
    max_model_len: int
    dtype: str
    override_neuron_config: dict[str, Any] | None  # on inf2: NxD Inference's NeuronConfig keys; None on GPUs
    quantization: str | None = None  # vLLM --quantization of a quantised CUDA variant (variants.py)

    def keywords(self) -> dict[str, Any]:
        """EngineArgs keywords, as `vllm.LLM(model, **keywords)` takes them."""
        values: dict[str, Any] = {
            "tensor_parallel_size": self.tensor_parallel_size,
            "max_num_seqs": self.max_num_seqs,
            "max_model_len": self.max_model_len,
            "dtype": self.dtype,
        }
        if self.override_neuron_config is not None:
            values["additional_config"] = {"override_neuron_config": self.override_neuron_config}
            values["enable_prefix_caching"] = False
            values["num_gpu_blocks_override"] = self.max_num_seqs
        if self.quantization is not None:
            values["quantization"] = self.quantization
        return values

    def flags(self) -> list[str]:
        """The same settings as the server's command-line flags."""
        return as_flags(self.keywords())


def as_flags(keywords: dict[str, Any]) -> list[str]:
    """EngineArgs keywords as vLLM's command-line flags (a boolean as its --X / --no-X pair, a dict as JSON)."""
    args: list[str] = []
    for key, value in keywords.items():
        flag = key.replace("_", "-")
        if isinstance(value, bool):
            args.append(f"--{flag}" if value else f"--no-{flag}")
            continue
        args += [f"--{flag}", json.dumps(value) if isinstance(value, dict) else str(value)]
    return args


def neuron_config(keywords: dict[str, Any]) -> dict[str, Any] | None:
    """The NeuronConfig overrides in an engine's keywords (additional_config's override_neuron_config), or None."""
    found = (keywords.get("additional_config") or {}).get("override_neuron_config")
    return dict(found) if found is not None else None


def neuron_overrides(model: ModelSpec, artefact_dir: str = MODEL_DIR) -> dict[str, Any]:
    """override_neuron_config: the sharded save, and a quantised variant's NxD Inference keys with the path of its
    quantized checkpoint inside the artefact as `artefact_dir` sees it."""
    quantization = VARIANTS[model.artefact_variant].neuron_quantization
    if not quantization:
        return dict(NEURON_OVERRIDES)
    return {
        **NEURON_OVERRIDES,
        **quantization,
        "quantized_checkpoints_path": f"{artefact_dir.rstrip('/')}/{NEURON_QUANTIZED_DIR}",
    }


def engine_settings(model: ModelSpec, artefact_dir: str = MODEL_DIR) -> EngineSettings:
    """The server's engine (`artefact_dir`: where the artefact is seen; only a neuron-int8 path depends on it)."""
    neuron = FAMILIES[model.accelerator].neuron
    variant = VARIANTS[model.artefact_variant]
    return EngineSettings(
        tensor_parallel_size=tensor_parallel_size(model),
        max_num_seqs=max_num_seqs(model),
        max_model_len=model.max_model_len,
        dtype=DTYPE if neuron else dtype(model),
        override_neuron_config=neuron_overrides(model, artefact_dir) if neuron else None,
        quantization=variant.quantization,
    )
