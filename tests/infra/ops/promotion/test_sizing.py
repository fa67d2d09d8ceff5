"""Conversion Jobs fit the pool they target: requests sized from the checkpoint, checked against the pool's
instance types (catalog facts less the system reserve) and root volume (pure)."""

from __future__ import annotations

import pytest

from infra.core.project import load_project, stack_config
from infra.kinds import load
from infra.ops.promotion import sizing
from infra.ops.promotion.recipes import RECIPES, VARIANTS
from tests.infra.ops.promotion.standins import serving_config

DEMO = load(serving_config()).serving.node_pools  # stacks/Pulumi.serving-demo.yaml
FAMILIES = load(stack_config(load_project(), "serving-gpu-families")).serving.node_pools  # g4dn, g6, g6e too
SEVEN_B = 14_483_464_192  # Mistral-7B in bf16 (two safetensors shards), bytes


def _pool(variant: str):
    """The recipe's pool as the demo stack declares it, else as the GPU families example does (g6 for fp8)."""
    return getattr(DEMO, RECIPES[variant].accelerator) or getattr(FAMILIES, RECIPES[variant].accelerator)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("size", [SEVEN_B, 1_000_000], ids=["7b-bf16", "tiny"])
def test_each_recipe_fits_the_example_pools(variant, size):
    need = sizing.conversion_resources(RECIPES[variant], size)
    pool = _pool(variant)
    assert (
        sizing.fit_problem(variant, RECIPES[variant].accelerator, pool.instance_types, pool.disk_gib, need, size)
        is None
    )
    assert any(sizing.holds(t, need) for t in pool.instance_types)


def test_the_7b_conversions_need_the_larger_size_of_each_demo_pool():
    need = {v: sizing.conversion_resources(RECIPES[v], SEVEN_B) for v in VARIANTS}
    assert need["cuda"] == sizing.Resources(2, 21, 37, 1)
    assert need["neuron"] == sizing.Resources(4, 35, 44, 1)
    # llm-compressor loads the whole model into host memory once (the checkpoint's size) beside one layer's
    # calibration activations: every quantised CUDA variant needs the pool's larger type
    for variant in ("cuda-fp8", "cuda-int8", "cuda-int4"):
        assert need[variant] == sizing.Resources(2, 24, 32, 1)
    assert [t for t in DEMO.g5.instance_types if sizing.holds(t, need["cuda-int4"])] == ["g5.2xlarge"]
    assert [t for t in DEMO.g5.instance_types if sizing.holds(t, need["cuda"])] == ["g5.2xlarge"]
    assert [t for t in DEMO.inf2.instance_types if sizing.holds(t, need["neuron"])] == ["inf2.8xlarge"]


def test_allocatable_is_the_catalog_less_the_documented_reserve():
    g5 = sizing.allocatable("g5.2xlarge", 200)  # 8 vCPUs, 32 GiB
    assert g5.cpu == pytest.approx(8 - (0.06 + 0.01 + 2 * 0.005 + 4 * 0.0025) - 0.25)
    assert g5.memory_gib == pytest.approx((32768 - (255 + 11 * 110) - 100 - 512) / 1024)
    assert g5.disk_gib == pytest.approx(200 * 0.9 - 40)
    assert sizing.kube_reserved_cpu(1) == pytest.approx(0.06)
    assert sizing.disk_needed(sizing.Resources(1, 1, 140)) == 200


def test_a_root_volume_too_small_is_refused_naming_the_disk_that_would_do():
    need = sizing.conversion_resources(RECIPES["cuda"], SEVEN_B)
    problem = sizing.fit_problem("cuda", "g5", ["g5.xlarge", "g5.2xlarge"], 70, need, SEVEN_B)
    assert str(problem) == (
        "mlinfra:serving.nodePools.g5: variant cuda needs 1 accelerator, 2 CPU, 21 GiB memory and 37 GiB disk to "
        "convert a 13.5 GiB checkpoint; no instance type of node pool g5 (g5.xlarge, g5.2xlarge; diskGib 70, 23 GiB "
        "usable) holds it: diskGib 86 would hold the work volume"
    )


def test_the_server_shape_sets_the_devices_a_job_needs():
    need = sizing.conversion_resources(RECIPES["neuron"], SEVEN_B, devices=6)
    problem = sizing.fit_problem("neuron", "inf2", ["inf2.xlarge", "inf2.8xlarge"], 200, need, SEVEN_B)
    # inf2.xlarge and inf2.8xlarge have one Neuron device each: a 12-core tensor-parallel server needs 6.
    assert str(problem).endswith("holds it: inf2.24xlarge would (add it to instanceTypes)")


def test_no_type_of_the_accelerator_is_large_enough():
    need = sizing.Resources(4, 5000, 10)
    problem = sizing.fit_problem("cuda", "g5", ["g5.xlarge", "g5.2xlarge"], 200, need, 10**12)
    assert str(problem).endswith("holds it: no instance type of its accelerator in the catalog would")


def test_a_neuron_server_holds_its_weights_in_host_memory():
    """An 8B model in bf16 is ~16 GB: the old default memoryGib 10 could not load it on inf2."""
    from infra.serving.spec import ModelSpec

    eight_b = 16 * 10**9
    model = ModelSpec.model_validate({"name": "llama", "version": "1", "accelerator": "inf2", "image": "i:1"})
    [memory, node] = sizing.server_problems("mlinfra:serving.models[0]", model, ["inf2.xlarge"], eight_b)
    assert str(memory) == (
        "mlinfra:serving.models[0].memoryGib: a replica of llama loading 14.9 GiB of weights on inf2 needs about "
        "21 GiB of memory; memoryGib is 10: set memoryGib to 21"
    )
    # inf2.xlarge has 16 GiB: the replica needs the 8xlarge (one device, 128 GiB).
    assert str(node).endswith("fits no node of inf2.xlarge: add inf2.8xlarge")
    sized = model.model_copy(update={"memory_gib": 21})
    assert sizing.server_problems("m", sized, ["inf2.xlarge", "inf2.8xlarge"], eight_b) == []
