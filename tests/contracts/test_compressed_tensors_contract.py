"""The quantised CUDA variants' facts against the compressed-tensors format recorded from vLLM's and
compressed-tensors' sources at the pinned versions (data/compressed_tensors.json): the format each recipe
writes, the --quantization the server is given, and the minimum capability of the scheme vLLM picks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.ops.promotion import quantize
from infra.ops.promotion.recipes import RECIPES
from infra.serving.variants import VARIANTS

CONTRACT = json.loads((Path(__file__).parent / "data" / "compressed_tensors.json").read_text(encoding="utf-8"))
RECORDED = CONTRACT["variants"]


@pytest.mark.parametrize("variant", sorted(RECORDED))
def test_each_variant_is_loaded_as_compressed_tensors_by_the_scheme_recorded(variant):
    facts, recipe = VARIANTS[variant], RECIPES[variant]
    assert facts.quantization == CONTRACT["quantMethod"]  # the server's --quantization
    assert facts.min_compute_capability is not None
    assert round(facts.min_compute_capability * 10) == RECORDED[variant]["minCapability"]
    config = quantize.quantization_config(recipe.precision)
    assert config["quant_method"] == CONTRACT["quantMethod"] and config["format"] == RECORDED[variant]["format"]
    assert recipe.format.startswith(f"compressed-tensors {RECORDED[variant]['format']} safetensors")


def test_int4_groups_are_a_size_marlin_takes():
    assert quantize.CONVERT_GROUP in RECORDED["cuda-int4"]["marlinGroupSizes"]
    assert RECORDED["cuda-int4"]["weights"]["group_size"] == quantize.CONVERT_GROUP


def test_every_quantised_cuda_variant_is_recorded():
    assert {name for name, facts in VARIANTS.items() if facts.kind == "gpu" and facts.quantised} == set(RECORDED)


@pytest.mark.parametrize("variant", sorted(RECORDED))
def test_the_recorded_capability_is_the_scheme_class_answer_at_the_pinned_vllm(variant):
    """minCapability as vLLM 0.33.0's own scheme class answers get_min_capability() (extract_vllm_args.py)."""
    answers = json.loads((Path(__file__).parent / "data" / "vllm" / "vllm-0.33.0.json").read_text(encoding="utf-8"))
    scheme = RECORDED[variant]["vllmScheme"].split()[0]
    assert answers["schemeMinCapability"][scheme] == RECORDED[variant]["minCapability"]
