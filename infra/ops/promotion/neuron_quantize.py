"""The neuron-int8 conversion's first half, run inside the conversion Job in the Neuron server image: NxD
Inference's own quantiser writes its quantized checkpoint of a Hugging Face checkpoint, which the compile that
follows reads (engine_check.py with NEURON_COMPILED_ARTIFACTS, as for the bf16 `neuron` variant).

vLLM-Neuron never writes that checkpoint (it compiles with `quantized` set and NxD Inference raises
FileNotFoundError when `quantized_checkpoints_path` holds nothing), so this program calls NxD Inference's
`save_quantized_state_dict` first, with the NeuronConfig keys the server's engine settings name
(`override_neuron_config`: quantized, quantization_type, quantization_dtype, modules_to_not_convert,
quantized_checkpoints_path). NxD Inference loads the checkpoint in fp32 on the CPU (transformers'
from_pretrained), quantises every Linear but `modules_to_not_convert` per output channel (torch's dynamic
quantisation: int8 `weight`, fp32 `scale` = max|w| / 127 of each row) and, the path being a directory, writes it
as safetensors (model.safetensors, or shards with model.safetensors.index.json). The model class is the one
vLLM-Neuron serves the architecture with (its own table). Sources: tests/contracts/data/nxd_inference.json.

    python3 neuron_quantize.py <checkpoint dir> <engine keywords, JSON>

Standard library, transformers, vLLM and NxD Inference only: it runs in the server image.
"""

import importlib
import json
import os
import sys

QUANTIZATION_KEYS = (
    "quantized",
    "quantized_checkpoints_path",
    "quantization_type",
    "quantization_dtype",
    "modules_to_not_convert",
)


def quantization_overrides(keywords):
    """The NeuronConfig keys of the quantisation, from the engine keywords (exit 2 when there are none)."""
    overrides = keywords.get("override_neuron_config") or {}
    if not overrides.get("quantized") or not overrides.get("quantized_checkpoints_path"):
        raise ValueError("the engine's override_neuron_config sets no quantized checkpoint")
    return {key: overrides[key] for key in QUANTIZATION_KEYS if key in overrides}


def main(argv):
    if len(argv) != 3:
        print("usage: neuron_quantize <checkpoint dir> <engine keywords JSON>", file=sys.stderr)
        return 2
    checkpoint, keywords = argv[1], json.loads(argv[2])
    try:
        overrides = quantization_overrides(keywords)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    # In the server image only.
    from neuronx_distributed_inference.utils.hf_adapter import (  # type: ignore[import-not-found]
        load_pretrained_config,
    )
    from transformers import AutoConfig
    from vllm.model_executor.model_loader import neuronx_distributed as served  # type: ignore[import-not-found]

    architecture = served._get_model_architecture(AutoConfig.from_pretrained(checkpoint))
    module, name = served._NEURON_SUPPORTED_MODELS[architecture]
    model_class = getattr(importlib.import_module(module), name)
    neuron_config = model_class.get_neuron_config_cls()(tp_degree=keywords["tensor_parallel_size"], **overrides)
    config = model_class.get_config_cls()(neuron_config, load_config=load_pretrained_config(checkpoint))
    path = overrides["quantized_checkpoints_path"]
    os.makedirs(path, exist_ok=True)  # a directory: NxD Inference writes safetensors there (else one torch.save file)
    model_class.save_quantized_state_dict(checkpoint, config)
    written = sorted(os.listdir(path))
    if not any(f.endswith(".safetensors") for f in written):
        print(f"error: NxD Inference wrote no safetensors to {path} ({written})", file=sys.stderr)
        return 1
    print(json.dumps({"architecture": architecture, "model": f"{module}.{name}", "path": path, "files": written}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
