"""A tiny Llama-shaped causal LM (Hugging Face LlamaForCausalLM's parameter names and config.json), trained on
tiny_lm's corpus, written as a sharded safetensors checkpoint, and read back from a compressed-tensors artefact
by a decoder written from the recorded format (tests/contracts/data/compressed_tensors.json), for the
conversion Job's program (quantize.py convert).

Pre-norm decoder layers: RMSNorm, rotary positions, separate q/k/v/o projections, SwiGLU MLP (gate, up, down),
no biases, untied lm_head. Width 128 so that int4 groups of 128 fit.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

from infra.ops.promotion import quantize
from tests.infra.ops.promotion import tiny_lm

WIDTH, INTERMEDIATE, HEADS, LAYERS = 128, 256, 4, 2
LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj") + tuple(
    f"mlp.{name}_proj" for name in ("gate", "up", "down")
)


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary(x: torch.Tensor) -> torch.Tensor:
    """Rotary positions, Hugging Face's rotate_half layout; x is (batch, heads, n, head dim)."""
    n, dim = x.shape[2], x.shape[3]
    inverse = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    angles = torch.outer(torch.arange(n, dtype=torch.float32), inverse)
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    half = torch.cat([-x[..., dim // 2 :], x[..., : dim // 2]], -1)
    return x * cos + half * sin


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(WIDTH, WIDTH, bias=False) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, w = x.shape
        q, k, v = (
            p(x).reshape(b, n, HEADS, w // HEADS).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj)
        )
        out = nn.functional.scaled_dot_product_attention(rotary(q), rotary(k), v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, n, w))


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(WIDTH, INTERMEDIATE, bias=False)
        self.up_proj = nn.Linear(WIDTH, INTERMEDIATE, bias=False)
        self.down_proj = nn.Linear(INTERMEDIATE, WIDTH, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(WIDTH), RMSNorm(WIDTH)
        self.self_attn, self.mlp = Attention(), MLP()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(nn.Module):
    def __init__(self, vocabulary: int) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocabulary, WIDTH)
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.norm = RMSNorm(WIDTH)


class TinyLlama(nn.Module):
    def __init__(self, vocabulary: int) -> None:
        super().__init__()
        self.model = Decoder(vocabulary)
        self.lm_head = nn.Linear(WIDTH, vocabulary, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.model.embed_tokens(ids[:, -tiny_lm.CONTEXT :])
        for layer in self.model.layers:
            x = layer(x)
        return self.lm_head(self.model.norm(x))


RECIPE = tiny_lm.Recipe("tiny-llama", TinyLlama, (RMSNorm, rotary, Attention, MLP, Layer, Decoder, TinyLlama))


@functools.cache
def trained() -> tuple[TinyLlama, tiny_lm.Corpus]:
    """The TinyLlama trained as tiny_lm's model is, with the recorded weights."""
    model, text = RECIPE.trained()
    assert isinstance(model, TinyLlama)
    return model, text


def config(vocabulary: int) -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": WIDTH,
        "intermediate_size": INTERMEDIATE,
        "num_attention_heads": HEADS,
        "num_key_value_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "vocab_size": vocabulary,
        "max_position_embeddings": tiny_lm.CONTEXT,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }


def save_tokenizer(text: tiny_lm.Corpus, path: Path) -> None:
    """The corpus' character-level encoding as a Hugging Face tokenizer (one token per character, none added), so
    that transformers' AutoTokenizer encodes as text.encode does (awq.py's loader reads it) and decodes back to
    the text (lm-eval compares generations as text)."""
    from tokenizers import Regex, Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    vocabulary = {c: i for i, c in enumerate(text.vocabulary)}
    tokenizer = Tokenizer(WordLevel(vocabulary, unk_token=text.vocabulary[0]))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()  # characters back to the text, with no space between them
    # A line ends a generation (lm-eval's generation asks for an end-of-sequence token); encoding adds none.
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="\n").save_pretrained(str(path))


def save_checkpoint(model: TinyLlama, text: tiny_lm.Corpus, path: Path) -> None:
    """config.json, two safetensors shards with their index (one per half of the state), a vocabulary file and a
    Hugging Face tokenizer (save_tokenizer)."""
    path.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    names = list(state)
    shards = {"model-00001-of-00002.safetensors": names[: len(names) // 2]}
    shards["model-00002-of-00002.safetensors"] = names[len(names) // 2 :]
    for file, keys in shards.items():
        save_file({k: state[k] for k in keys}, str(path / file), metadata={"format": "pt"})
    weight_map = {k: file for file, keys in shards.items() for k in keys}
    (path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map}), encoding="utf-8"
    )
    (path / "config.json").write_text(json.dumps(config(len(text.vocabulary))), encoding="utf-8")
    (path / "vocabulary.json").write_text(json.dumps(text.vocabulary), encoding="utf-8")
    save_tokenizer(text, path)


def read_artefact(path: Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(config.json, every tensor), through the index as vLLM reads it (or the one model.safetensors that a
    checkpoint of a single shard is, without an index)."""
    indexed = path / "model.safetensors.index.json"
    if indexed.exists():
        index = json.loads(indexed.read_text(encoding="utf-8"))
    else:
        with safe_open(str(path / "model.safetensors"), framework="pt") as handle:
            index = {"weight_map": dict.fromkeys(handle.keys(), "model.safetensors")}
    tensors = {}
    for file in sorted(set(index["weight_map"].values())):
        with safe_open(str(path / file), framework="pt") as handle:
            tensors.update({k: handle.get_tensor(k) for k in handle.keys()})
    assert set(tensors) == set(index["weight_map"])
    return json.loads((path / "config.json").read_text(encoding="utf-8")), tensors


def unpack_int4(packed: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """The recorded packing, read back: column 8k + i from bits 4i.. of word k, minus the offset 8."""
    words = packed.to(torch.int64) & 0xFFFFFFFF
    rows, cols = shape
    nibbles = torch.stack([(words >> (4 * i)) & 0xF for i in range(8)], dim=-1)
    return (nibbles.reshape(rows, -1)[:, :cols] - 8).to(torch.int8)


def dequantised(tensors: dict[str, torch.Tensor], layer: str, weights: dict[str, Any]) -> torch.Tensor:
    """A quantised layer's weight from the artefact, by its config group's weight arguments."""
    scale = tensors[f"{layer}.weight_scale"].to(torch.float32)
    if weights["strategy"] == "group":
        rows, cols = (int(x) for x in tensors[f"{layer}.weight_shape"])
        values = unpack_int4(tensors[f"{layer}.weight_packed"], (rows, cols)).to(torch.float32)
        group = weights["group_size"]
        return (values.reshape(rows, cols // group, group) * scale.unsqueeze(-1)).reshape(rows, cols)
    return tensors[f"{layer}.weight"].to(torch.float32) * scale


class ArtefactLinear(nn.Module):
    """A linear layer as the server computes it from the artefact: dequantised weights, and the input quantised
    per token when the config group quantises activations dynamically."""

    def __init__(self, weight: torch.Tensor, activations: dict[str, Any] | None) -> None:
        super().__init__()
        self.register_buffer("weight", weight)
        self.activations = None if activations is None else activations["type"] + str(activations["num_bits"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.activations is not None:
            x = quantize.quantise_activations(x, "int8" if self.activations == "int8" else "fp8")
        return nn.functional.linear(x, self.weight)


def load_artefact(path: Path) -> TinyLlama:
    """The artefact as a TinyLlama: quantised layers decoded, every other tensor as it is."""
    found, tensors = read_artefact(path)
    group = found["quantization_config"]["config_groups"]["group_0"]
    model = TinyLlama(found["vocab_size"])
    quantised = [f"model.layers.{i}.{name}" for i in range(LAYERS) for name in LINEARS]
    for full in quantised:
        parent, _, child = full.rpartition(".")
        replacement = ArtefactLinear(dequantised(tensors, full, group["weights"]), group["input_activations"])
        setattr(model.get_submodule(parent), child, replacement)
    plain = {k: v for k, v in tensors.items() if not k.startswith(tuple(q + "." for q in quantised))}
    loaded = model.load_state_dict(plain, strict=False)
    assert not loaded.unexpected_keys and sorted(loaded.missing_keys) == sorted(q + ".weight" for q in quantised)
    return model.eval()
