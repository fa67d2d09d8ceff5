"""NxD Inference's int8 quantized checkpoint, written for the tests as NxD Inference v0.5.9230 writes it
(tests/contracts/data/nxd_inference.json): NxD Inference itself runs only in the Neuron image, so the tests write
its recorded format from a Hugging Face-named state with quantize.py's per-channel int8 quantiser (checked against
torch's own per-channel quantisation, which NxD Inference's quantiser calls, in
tests/contracts/test_nxd_inference_contract.py).

Every 2-D `.weight` of a Linear (every 2-D weight but the embeddings) except those under `modules_to_not_convert`
becomes `<layer>.weight` int8 + `<layer>.scale` float32 [out, 1]; every other tensor is written in float32 (the
dtype NxD Inference loads the checkpoint in); the decoder's names lose `model.`; the file is model.safetensors,
or shards with model.safetensors.index.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from infra.ops.promotion import quantize

NOT_LINEAR = ("embed_tokens.weight",)


def nxd_name(name: str) -> str:
    return name if name.startswith("lm_head.") else name.removeprefix("model.")


def quantized_state(
    state: dict[str, torch.Tensor], modules_to_not_convert: tuple[str, ...] = ("lm_head",), scale_error: float = 1.0
) -> dict[str, torch.Tensor]:
    """`state` (Hugging Face names) as NxD Inference's prepare_quantized_state_dict leaves it; `scale_error` != 1
    quantises with every scale that much off (quantize.int8_weights: a deliberately broken variant)."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        layer = name.removesuffix(".weight")
        linear = tensor.dim() == 2 and name.endswith(".weight") and not name.endswith(NOT_LINEAR)
        if linear and not any(skip in layer for skip in modules_to_not_convert):
            values, scale = quantize.int8_weights(tensor.detach().float(), scale_error, scale_dtype=torch.float32)
            out[nxd_name(layer) + ".weight"] = values
            out[nxd_name(layer) + ".scale"] = scale.to(torch.float32)
        else:
            out[nxd_name(name)] = tensor.detach().to(torch.float32)
    return {k: v.contiguous() for k, v in out.items()}


def save(tensors: dict[str, torch.Tensor], directory: Path, shards: int = 1) -> None:
    """model.safetensors, or `shards` files model-0000i-of-0000n.safetensors and their index."""
    directory.mkdir(parents=True, exist_ok=True)
    if shards == 1:
        save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
        return
    names = list(tensors)
    weight_map = {}
    for i in range(shards):
        file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = names[i::shards]
        save_file({k: tensors[k] for k in part}, str(directory / file), metadata={"format": "pt"})
        weight_map |= dict.fromkeys(part, file)
    (directory / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map}), encoding="utf-8"
    )
