"""A model's architecture as the sizing needs it, read from its Hugging Face `config.json` (pure).

Layers, hidden size, attention and KV heads, head size, MLP size, vocabulary and the parameter count (total,
and active per token for mixture-of-experts models) decide the weights' bytes at a precision, the KV cache's
bytes per token, and the work of a prefill and a decode step. The count is computed from the shapes
(embeddings, attention, MLP, norms; biases left out, a few millionths of the total), so it needs no weights.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG
from typing import Any

from infra.catalog.accelerators import format_bytes

# Decoder architectures whose MLP is gated (gate, up and down projections: three hidden x intermediate
# matrices). Others are refused rather than counted wrong.
GATED_DECODERS = (
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "MixtralForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "GemmaForCausalLM",
    "Gemma2ForCausalLM",
    "Phi3ForCausalLM",
)
# Embeddings, the LM head and norms stay in 16 bits when the linear layers are quantised (AWQ, GPTQ, FP8
# checkpoints all keep them), so a quantised model's weights are not simply parameters x bytes.
UNQUANTISED_BYTES = 2


class ModelConfigError(ValueError):
    """A config.json that does not describe a model the sizing can read; the message names the key."""


@dataclass(frozen=True)
class ModelShape:
    architecture: str
    layers: int
    hidden_size: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    parameters: int  # total: what the weights hold
    active_parameters: int  # per token: what a forward pass multiplies (MoE: the experts a token uses)
    max_position_embeddings: int | None = None
    tied_embeddings: bool = False
    experts: int = 1
    experts_per_token: int = 1

    @property
    def embedding_parameters(self) -> int:
        return self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2)

    @property
    def norm_parameters(self) -> int:
        return (2 * self.layers + 1) * self.hidden_size

    def weight_bytes(self, weight_format: str) -> float:
        """Bytes of the weights with the linear layers in `weight_format` (embeddings and norms 16-bit)."""
        linear = self.parameters - self.embedding_parameters - self.norm_parameters
        unquantised = self.embedding_parameters + self.norm_parameters
        return linear * format_bytes(weight_format) + unquantised * max(format_bytes(weight_format), UNQUANTISED_BYTES)

    def kv_bytes_per_token(self, kv_format: str, tensor_parallel: int = 1) -> float:
        """K and V of every layer for one token. With more shards than KV heads, each shard keeps a copy of
        the head it attends with (vLLM replicates KV heads when tensor_parallel_size > num_key_value_heads)."""
        heads = max(self.kv_heads, tensor_parallel)
        return 2 * self.layers * heads * self.head_dim * format_bytes(kv_format)

    def body_flops_per_token(self) -> float:
        """FLOPs (2 per multiply-add) of the decoder layers' matrices for one token (the experts it uses)."""
        return 2.0 * (self.active_parameters - self.norm_parameters - self.embedding_parameters)

    def head_flops_per_token(self) -> float:
        """FLOPs of the LM head for one token whose logits are computed (the last of a prompt, each decoded)."""
        return 2.0 * self.vocab_size * self.hidden_size

    def attention_flops(self, query_tokens: int, context_tokens: float) -> float:
        """Q.K^T and attention.V of `query_tokens` against `context_tokens` each, every layer."""
        return 4.0 * self.layers * self.heads * self.head_dim * query_tokens * context_tokens


def _get(config: Mapping[str, Any], key: str, where: str, required: bool = True) -> Any:
    value = config.get(key)
    if value is None and required:
        raise ModelConfigError(f"{where}{key} is missing")
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
        raise ModelConfigError(f"{where}{key} is {value!r}; a positive integer is expected")
    return value


def model_shape(config: Mapping[str, Any], where: str = "config.json: ") -> ModelShape:
    """The shape of a Hugging Face causal LM from its config.json (a multimodal config's text_config)."""
    if not isinstance(config, Mapping):
        raise ModelConfigError(f"{where}not a JSON object")
    architectures = config.get("architectures") or []
    architecture = architectures[0] if isinstance(architectures, list) and architectures else None
    if isinstance(config.get("text_config"), Mapping) and architecture not in GATED_DECODERS:
        config, where = config["text_config"], where + "text_config."
        architecture = architecture or config.get("architectures", [None])[0]
    if architecture not in GATED_DECODERS:
        raise ModelConfigError(
            f"{where}architectures is {architectures!r}; the sizing reads these decoders: {', '.join(GATED_DECODERS)}"
        )
    layers = _get(config, "num_hidden_layers", where)
    hidden = _get(config, "hidden_size", where)
    heads = _get(config, "num_attention_heads", where)
    kv_heads = _get(config, "num_key_value_heads", where, required=False) or heads
    head_dim = _get(config, "head_dim", where, required=False) or hidden // heads
    intermediate = _get(config, "intermediate_size", where)
    vocab = _get(config, "vocab_size", where)
    experts = _get(config, "num_local_experts", where, required=False) or 1
    per_token = (_get(config, "num_experts_per_tok", where, required=False) or 1) if experts > 1 else 1
    if heads % kv_heads:
        raise ModelConfigError(
            f"{where}num_attention_heads ({heads}) is not a multiple of num_key_value_heads ({kv_heads})"
        )
    tied = bool(config.get("tie_word_embeddings", False))
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    mlp_one = 3 * hidden * intermediate
    router = hidden * experts if experts > 1 else 0
    norms = (2 * layers + 1) * hidden
    embeddings = vocab * hidden * (1 if tied else 2)
    total = layers * (attention + experts * mlp_one + router) + norms + embeddings
    active = layers * (attention + per_token * mlp_one + router) + norms + embeddings
    max_positions = config.get("max_position_embeddings")
    return ModelShape(
        architecture=architecture,
        layers=layers,
        hidden_size=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=intermediate,
        vocab_size=vocab,
        parameters=total,
        active_parameters=active,
        max_position_embeddings=max_positions if isinstance(max_positions, int) else None,
        tied_embeddings=tied,
        experts=experts,
        experts_per_token=per_token,
    )


MAX_CONFIG_BYTES = 1024 * 1024


def load_model_shape(path: str | Path) -> ModelShape:
    """model_shape of a config.json file; ModelConfigError names the file and what is wrong with it."""
    where = f"{path}: "
    try:
        # A FIFO or a device (stdin, /dev/zero) would hang or fill memory: a regular file of config size only.
        stat = Path(path).stat()
        if not S_ISREG(stat.st_mode):
            raise ModelConfigError(f"{where}not a regular file (a model's Hugging Face config.json)")
        if stat.st_size > MAX_CONFIG_BYTES:
            raise ModelConfigError(
                f"{where}{stat.st_size:,} bytes; a config.json is a few KiB (at most {MAX_CONFIG_BYTES // 1024} KiB)"
            )
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelConfigError(f"{where}no such file (a model's Hugging Face config.json)") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ModelConfigError(f"{where}cannot be read: {error}") from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ModelConfigError(f"{where}not JSON: {error.msg} at line {error.lineno}") from None
    return model_shape(config, where)
