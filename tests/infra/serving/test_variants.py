"""Variants as data: which pools can serve each, computed from the device facts; the config's refusal with the
pools that can; the engine flags and precision a quantised variant gives the server and the fit check."""

from __future__ import annotations

import typing
from dataclasses import replace

import pytest

from infra.catalog.accelerators import device
from infra.serving import engine
from infra.serving.fit import fit_findings
from infra.serving.spec import VARIANT_PRECISIONS, ModelSpec, Variant
from infra.serving.variants import VARIANTS, device_refusal, pools_for, variant_problem, variants_for
from tests.contracts.test_vllm_contracts import vllm_parser
from tests.infra.serving.aws.test_serving_config import problems, serving, with_architecture


def test_the_config_literal_and_the_table_name_the_same_variants():
    assert typing.get_args(Variant) == tuple(VARIANTS)
    assert VARIANT_PRECISIONS["cuda-int4"] == ("int4",) and VARIANT_PRECISIONS["neuron-int8"] == ("w8a16",)


@pytest.mark.parametrize(
    ("variant", "pools"),
    [
        ("neuron", ("inf2",)),
        ("cuda", ("g5", "g4dn", "g6", "g6e", "l4", "a100")),  # fp16 on T4
        ("cuda-fp8", ("g6", "g6e", "l4")),  # fp8 compute: Ada Lovelace (L4, L40S)
        ("cuda-int4", ("g5", "g4dn", "g6", "g6e", "l4", "a100")),  # Marlin from Turing (7.5) at vLLM 0.33.0
        ("cuda-int8", ("g5", "g4dn", "g6", "g6e", "l4", "a100")),  # W8A8 int8 from Turing (7.5)
        ("neuron-int8", ("inf2",)),
    ],
)
def test_pools_that_can_serve_each_variant_come_from_the_device_facts(variant, pools):
    assert pools_for(variant) == pools


def test_variants_each_pool_runs():
    assert variants_for("g4dn") == ("cuda", "cuda-int4", "cuda-int8")
    assert variants_for("g5") == ("cuda", "cuda-int4", "cuda-int8")
    assert variants_for("inf2") == ("neuron", "neuron-int8")


def test_fp8_on_a10g_is_refused_naming_the_pools_that_can():
    value = serving()
    value["models"][1]["variant"] = "cuda-fp8"
    assert problems(value) == [
        "mlinfra:serving.models[1].variant: cuda-fp8 artefacts cannot be served on g5: cuda-fp8 (weights fp8, "
        "activations fp8, KV cache bf16) needs what g5 lacks: A10G (Ampere) has no fp8 compute; it computes in fp32, "
        "bf16, fp16, int8; pools that can: g6 (L4), g6e (L40S), l4 (gcp L4)"
    ]


def test_a_kernel_above_the_devices_compute_capability_is_refused():
    """No catalogued device lacks only the capability at vLLM 0.33.0 (Marlin takes Turing; every fp8-computing
    device is Ada or later): a kernel that needed Ampere, as Marlin did at vLLM 0.9.1, refuses T4 by it."""
    ampere_marlin = replace(VARIANTS["cuda-int4"], min_compute_capability=8.0)
    assert device_refusal(device("T4"), ampere_marlin) == (
        "T4 (Turing) has compute capability 7.5; Marlin/Machete (CompressedTensorsWNA16) needs 8.0"
    )
    assert device_refusal(device("T4"), VARIANTS["cuda-int4"]) is None


def test_a_cuda_variant_on_inf2_names_the_neuron_variants():
    assert variant_problem("cuda-int8", "inf2") == (
        "cuda-int8 artefacts cannot be served on inf2: inf2 runs Neuron-compiled artefacts only; use neuron, "
        "neuron-int8"
    )


def test_int8_and_int4_on_t4_and_int4_on_a10g_are_accepted():
    value = serving(nodePools={"g4dn": {"maxSize": 6}, "g5": {}, "inf2": {"maxSize": 6}})  # two models each at peak
    value["models"][1].update(accelerator="g4dn", variant="cuda-int8")
    value["models"].append({**value["models"][1], "name": "m2", "variant": "cuda-int4"})
    value["models"].append({**value["models"][1], "name": "m3", "accelerator": "g5", "variant": "cuda-int4"})
    value["models"].append({**value["models"][0], "name": "m4", "variant": "neuron-int8"})
    from infra.kinds import load
    from tests.infra.serving.aws.test_serving_config import flat

    assert load(flat(value)) is not None


def model(accelerator: str, variant: str, image: str = "vllm/vllm-openai:v0.33.0", **more) -> ModelSpec:
    return ModelSpec.model_validate(
        {"name": "m", "version": "1", "accelerator": accelerator, "image": image, "variant": variant, **more}
    )


@pytest.mark.parametrize(
    ("accelerator", "variant", "quantization", "dtype"),
    [
        ("g6", "cuda-fp8", "compressed-tensors", "bfloat16"),
        ("g5", "cuda-int4", "compressed-tensors", "float16"),
        ("g4dn", "cuda-int8", "compressed-tensors", "float16"),  # T4: no bf16
        ("g5", "cuda-int8", "compressed-tensors", "bfloat16"),
        ("g5", "cuda", None, "bfloat16"),
    ],
)
@pytest.mark.parametrize("release", ["0.33.0"])
def test_quantised_variants_flags_parse_with_the_pinned_vllm(release, accelerator, variant, quantization, dtype):
    settings = engine.engine_settings(model(accelerator, variant))
    parsed = vllm_parser(release).parse_args(["--model", "/m", *settings.flags()])
    assert parsed.quantization == quantization and parsed.dtype == dtype
    assert parsed.kv_cache_dtype is None  # vLLM's default "auto": the KV cache in the model's 16-bit dtype


def test_the_neuron_int8_variant_asks_nxd_inference_for_int8_weights():
    settings = engine.engine_settings(model("inf2", "neuron-int8"))
    parsed = vllm_parser("0.16.0").parse_args(["--model", "/m", *settings.flags()])
    assert parsed.additional_config["override_neuron_config"] == {
        "save_sharded_checkpoint": True,
        "quantized": True,
        "quantization_type": "per_channel_symmetric",
        "quantization_dtype": "int8",
        "modules_to_not_convert": ["lm_head"],
        "quantized_checkpoints_path": "/models/neuron-quantized",  # NeuronConfig asserts it with `quantized`
    }
    assert parsed.quantization is None and engine.precision_of(model("inf2", "neuron-int8")).name == "w8a16"


def test_the_fit_check_sizes_a_quantised_variant_by_its_bytes_per_weight():
    # A 70B model: 131.4 GiB in bf16 does not fit four A10G; in int4 (0.5 byte per weight) it does.
    bf16 = with_architecture("llama-3-70b", acceleratorsPerReplica=4)["models"][1]
    found = fit_findings("m.", ModelSpec.model_validate(bf16), [_a10g()])
    assert [p.path for p in found] == ["m.acceleratorsPerReplica"] and "131.4 GiB of weights (bf16)" in found[0].message
    int4 = ModelSpec.model_validate({**bf16, "variant": "cuda-int4"})
    assert engine.precision_of(int4).name == "int4"
    assert fit_findings("m.", int4, [_a10g()]) == []


def test_a_precision_a_quantised_variant_does_not_provide_is_refused():
    value = with_architecture("llama-3-8b", variant="cuda-int4", precision="bf16")
    assert problems(value) == [
        "mlinfra:serving.models[1].precision: the cuda-int4 variant serves int4, not bf16; a quantised precision "
        "needs a variant built for it"
    ]


def _a10g():
    from infra.catalog.accelerators import device

    return device("A10G")
