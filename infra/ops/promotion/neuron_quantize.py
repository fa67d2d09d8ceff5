"""The neuron-int8 conversion's first half, run inside the conversion Job in the Neuron server image: NxD
Inference's own quantiser writes its quantized checkpoint of a Hugging Face checkpoint, which the compile that
follows reads (engine_check.py with NEURON_COMPILED_ARTIFACTS, as for the bf16 `neuron` variant).

The program calls NxD Inference's `save_quantized_state_dict` before any compile, with the NeuronConfig keys the
server's engine settings name (additional_config's `override_neuron_config`: quantized, quantization_type,
quantization_dtype, modules_to_not_convert, quantized_checkpoints_path): the 0.9.1 fork never wrote that checkpoint;
the vllm-neuron plugin (0.4/0.5, read at its 0.4.1 release) writes it itself when it compiles with `quantized` set,
so this step makes the artefact's checkpoint explicit, checked and in safetensors whatever the plugin release does
(NxD Inference writes one torch.save file where the directory does not exist).
NxD Inference loads the checkpoint in fp32 on the CPU (transformers'
from_pretrained), quantises every Linear but `modules_to_not_convert` per output channel (torch's dynamic
quantisation: int8 `weight`, fp32 `scale` = max|w| / 127 of each row) and, the path being a directory, writes it
as safetensors (model.safetensors, or shards with model.safetensors.index.json). The model class is the one the
plugin serves the architecture with: NxD Inference's own MODEL_TYPES table (utils/constants.py), by the config's
model_type and the causal-LM task. Sources: tests/contracts/data/nxd_inference.json.

    python3 neuron_quantize.py <checkpoint dir> <engine keywords, JSON>

Standard library, transformers and NxD Inference only: it runs in the server image.
"""

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
    overrides = (keywords.get("additional_config") or {}).get("override_neuron_config") or {}
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
    from neuronx_distributed_inference.utils.constants import MODEL_TYPES  # type: ignore[import-not-found]
    from neuronx_distributed_inference.utils.hf_adapter import (  # type: ignore[import-not-found]
        load_pretrained_config,
    )
    from transformers import AutoConfig

    architecture = AutoConfig.from_pretrained(checkpoint).model_type
    if architecture not in MODEL_TYPES or "causal-lm" not in MODEL_TYPES[architecture]:
        print(f"error: NxD Inference has no causal-LM model for model_type {architecture!r}", file=sys.stderr)
        return 2
    model_class = MODEL_TYPES[architecture]["causal-lm"]
    neuron_config = model_class.get_neuron_config_cls()(tp_degree=keywords["tensor_parallel_size"], **overrides)
    config = model_class.get_config_cls()(neuron_config, load_config=load_pretrained_config(checkpoint))
    path = overrides["quantized_checkpoints_path"]
    os.makedirs(path, exist_ok=True)  # a directory: NxD Inference writes safetensors there (else one torch.save file)
    model_class.save_quantized_state_dict(checkpoint, config)
    written = sorted(os.listdir(path))
    if not any(f.endswith(".safetensors") for f in written):
        print(f"error: NxD Inference wrote no safetensors to {path} ({written})", file=sys.stderr)
        return 1
    model = f"{model_class.__module__}.{model_class.__name__}"
    print(json.dumps({"architecture": architecture, "model": model, "path": path, "files": written}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
