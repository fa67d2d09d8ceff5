"""A model's shape from its config.json: the committed configs give the publishers' parameter counts, and a
config the sizing cannot read is refused naming the file and the key."""

from __future__ import annotations

import json

import pytest

from infra.serving.model_shape import ModelConfigError, load_model_shape, model_shape
from tests.helpers import ROOT

MODELS = ROOT / "stacks" / "models"


@pytest.mark.parametrize(
    ("name", "parameters", "kv_kib_bf16"),
    [
        ("llama-3-8b", 8_030_261_248, 128),  # Meta's stated count
        ("llama-3-70b", 70_553_706_496, 320),
        ("mistral-7b", 7_241_732_096, 128),
        ("llama-3.2-3b", 3_212_749_824, 112),
        ("llama-2-7b", 6_738_415_616, 512),
        ("llama-2-13b", 13_015_864_320, 800),
        ("llama-2-70b", 68_976_648_192, 320),
    ],
)
def test_committed_configs_give_the_published_sizes(name, parameters, kv_kib_bf16):
    shape = load_model_shape(MODELS / name / "config.json")
    assert shape.parameters == shape.active_parameters == parameters
    assert shape.kv_bytes_per_token("bf16") == kv_kib_bf16 * 1024


def test_weights_at_a_precision_keep_embeddings_16_bit():
    shape = load_model_shape(MODELS / "llama-3-8b" / "config.json")
    assert shape.weight_bytes("bf16") == 2 * shape.parameters
    embeddings = 2 * 128256 * 4096 + (2 * 32 + 1) * 4096
    assert shape.weight_bytes("int4") == (shape.parameters - embeddings) * 0.5 + embeddings * 2
    assert shape.weight_bytes("fp8") == (shape.parameters - embeddings) + embeddings * 2


def test_kv_heads_are_replicated_past_the_kv_head_count():
    shape = load_model_shape(MODELS / "llama-3-8b" / "config.json")  # 8 KV heads
    assert shape.kv_bytes_per_token("bf16", tensor_parallel=8) == shape.kv_bytes_per_token("bf16")
    assert shape.kv_bytes_per_token("bf16", tensor_parallel=16) == 2 * shape.kv_bytes_per_token("bf16")
    assert shape.kv_bytes_per_token("fp8") == shape.kv_bytes_per_token("bf16") / 2


def test_mixture_of_experts_counts_total_and_active_parameters():
    config = json.loads((MODELS / "mistral-7b" / "config.json").read_text(encoding="utf-8"))
    config.update(architectures=["MixtralForCausalLM"], num_local_experts=8, num_experts_per_tok=2)
    shape = model_shape(config)
    mlp = 3 * 4096 * 14336
    assert shape.parameters - shape.active_parameters == 32 * 6 * mlp
    assert (shape.experts, shape.experts_per_token) == (8, 2)


def test_head_dim_given_or_derived():
    config = json.loads((MODELS / "llama-3-8b" / "config.json").read_text(encoding="utf-8"))
    assert model_shape(config).head_dim == 128
    assert model_shape({**config, "head_dim": 256}).head_dim == 256


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"num_hidden_layers": None}, "config.json: num_hidden_layers is missing"),
        ({"hidden_size": "4096"}, "config.json: hidden_size is '4096'; a positive integer is expected"),
        (
            {"num_key_value_heads": 5},
            "config.json: num_attention_heads (32) is not a multiple of num_key_value_heads (5)",
        ),
        ({"architectures": ["GPT2LMHeadModel"]}, "config.json: architectures is ['GPT2LMHeadModel']; the sizing reads"),
    ],
)
def test_a_config_the_sizing_cannot_read_names_the_key(change, message):
    config = json.loads((MODELS / "llama-3-8b" / "config.json").read_text(encoding="utf-8"))
    config.update(change)
    config = {k: v for k, v in config.items() if v is not None}
    with pytest.raises(ModelConfigError) as error:
        model_shape(config)
    assert str(error.value).startswith(message)


def test_file_errors_name_the_file(tmp_path):
    missing = tmp_path / "config.json"
    with pytest.raises(ModelConfigError, match=rf"^{missing}: no such file"):
        load_model_shape(missing)
    missing.write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelConfigError, match=rf"^{missing}: not JSON: "):
        load_model_shape(missing)
    missing.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ModelConfigError, match=rf"^{missing}: not a JSON object"):
        load_model_shape(missing)
