"""A replica's start-up budget: each term from the plan and the facts, the types it is computed on, and what the
Deployment carries of it."""

from __future__ import annotations

import math

import pytest

from infra.serving import engine, fit, manifests, startup
from infra.serving.aws import node_pools
from infra.serving.aws.config import AwsModelSpec, NodePoolSpec
from infra.serving.gcp import allocatable as gke_room
from infra.serving.gcp.config import GcpModelSpec

BASE = {"name": "m", "version": "1", "image": "vllm/vllm-openai:v0.33.0"}
LLAMA_8B = "stacks/models/llama-3-8b/config.json"


def model(cls=AwsModelSpec, **fields):
    return cls.model_validate({**BASE, **fields})


def test_each_term_follows_its_fact_and_the_weights_over_the_nodes_network():
    facts = startup.startup_facts()
    share = facts["weightLoad"]["value"]["networkShare"]
    budget = startup.startup_budget("g5.xlarge", "gpu", 10.0, 20e9, 10.0)
    assert [t.name for t in budget.terms] == list(startup.TERM_NAMES)
    assert budget.weights.seconds == pytest.approx(20e9 / (10e9 / 8 * share))
    assert budget.node.seconds == facts["nodeReadySeconds"]["value"]["gpu"]
    assert budget.engine.seconds == facts["engineInitSeconds"]["value"]["gpu"]
    pull = facts["imagePull"]["value"]
    assert budget.image.seconds == pytest.approx(pull["imageBytes"] / pull["bytesPerSecond"])
    assert budget.from_zero_seconds == pytest.approx(sum(t.seconds for t in budget.terms))
    assert budget.on_node_seconds == pytest.approx(budget.weights.seconds + budget.engine.seconds + 10.0)
    # Twice the weights or half the network: the weights term doubles, nothing else moves.
    heavier = startup.startup_budget("g5.xlarge", "gpu", 5.0, 20e9, 10.0)
    assert heavier.weights.seconds == pytest.approx(2 * budget.weights.seconds)
    assert heavier.from_zero_seconds - budget.from_zero_seconds == pytest.approx(budget.weights.seconds)


def test_a_type_without_a_bandwidth_figure_and_a_model_without_a_config_are_named_assumptions():
    budget = startup.startup_budget("g2-standard-8", "gpu", None, None, 10.0)
    fallback = startup.startup_facts()["weightLoad"]["value"]["fallbackGbps"]
    assert f"{fallback:g} Gbps" in budget.weights.basis
    assert "assumed" in budget.weights.basis
    assert budget.weights.seconds == pytest.approx(
        startup.ASSUMED_WEIGHT_BYTES
        / (fallback * 1e9 / 8 * startup.startup_facts()["weightLoad"]["value"]["networkShare"])
    )


def test_neuron_starts_slower_than_a_gpu_engine_on_the_same_network():
    gpu = startup.startup_budget("a", "gpu", 25.0, 16e9, 10.0)
    neuron = startup.startup_budget("b", "neuron", 25.0, 16e9, 10.0)
    assert neuron.engine.seconds > gpu.engine.seconds


def test_a_models_budget_weighs_its_variants_weights_on_each_type_that_holds_a_replica():
    entry = model(accelerator="inf2", modelConfig=LLAMA_8B, cpu=4, memoryGib=24)
    pool = NodePoolSpec(instanceTypes=["inf2.xlarge", "inf2.8xlarge"])
    types = node_pools.holding_types(entry, pool)
    assert list(types) == ["inf2.8xlarge"]  # 24 GiB does not fit what an inf2.xlarge leaves
    budgets = startup.model_budgets(entry, types)
    weights = fit.load_shape(entry).weight_bytes(engine.precision_of(entry).weights)
    assert f"{weights / 1e9:.1f} GB (the variant's)" in budgets["inf2.8xlarge"].weights.basis
    assert budgets["inf2.8xlarge"].engine.name == "engine"
    assert startup.slowest(budgets) is budgets["inf2.8xlarge"]
    # int4 weights are about a quarter of bf16's: the weights term shrinks with them.
    small = model(accelerator="g5", modelConfig=LLAMA_8B, variant="cuda-int4", precision="int4")
    bf16 = model(accelerator="g5", modelConfig=LLAMA_8B)
    quarter = startup.model_budgets(small, {"g5.xlarge": 10.0})["g5.xlarge"].weights.seconds
    full = startup.model_budgets(bf16, {"g5.xlarge": 10.0})["g5.xlarge"].weights.seconds
    assert quarter < full / 2


def test_gke_budgets_use_the_machine_types_that_hold_a_replica():
    entry = model(GcpModelSpec, accelerator="l4", modelConfig=LLAMA_8B)
    types = gke_room.holding_types(entry, ["g2-standard-8"])
    assert list(types) == ["g2-standard-8"]
    too_big = model(GcpModelSpec, accelerator="l4", cpu=64)
    assert gke_room.holding_types(too_big, ["g2-standard-8"]) == {}
    assert "no type of its pool holds a replica" in startup.describe("m", {})


def test_the_deployment_carries_the_budget_and_it_reads_back_term_by_term():
    entry = model(accelerator="g5", modelConfig=LLAMA_8B)
    budgets = startup.model_budgets(entry, {"g5.xlarge": 10.0, "g5.2xlarge": 10.0})
    meta = manifests.deployment_metadata(entry, "models", budgets)
    read = startup.from_annotation(meta["annotations"][startup.STARTUP_ANNOTATION])
    assert set(read) == {"g5.xlarge", "g5.2xlarge"}
    for name, budget in read.items():
        assert math.isclose(budget.from_zero_seconds, budgets[name].from_zero_seconds, abs_tol=0.5)
        assert [t.name for t in budget.terms] == list(startup.TERM_NAMES)
    assert startup.STARTUP_ANNOTATION not in (manifests.deployment_metadata(entry, "models").get("annotations") or {})


@pytest.mark.parametrize(
    "value",
    [
        "",
        "{}",
        "[]",
        '{"g5.xlarge": 3}',
        '{"g5.xlarge": {"node": 1}}',
        '{"a": {"node": -1, "image": 0, "weights": 0, "engine": 0, "ready": 0}}',
        "not json",
    ],
)
def test_an_annotation_mlinfra_did_not_write_is_refused(value):
    with pytest.raises(ValueError, match=startup.STARTUP_ANNOTATION):
        startup.from_annotation(value)


def test_the_preview_says_what_a_request_meets_at_zero():
    entry = model(accelerator="g5", modelConfig=LLAMA_8B, minReplicas=0, scaleToZero={"holdSeconds": 200})
    budgets = startup.model_budgets(entry, {"g5.xlarge": 10.0})
    line = startup.zero_summary(entry, budgets)
    assert line.startswith("scale to zero m: at zero the front door holds a request up to 3.3 min")
    assert f"the last replica goes after {startup.cooldown_seconds(entry, budgets) / 60:.1f} min" in line
    assert startup.zero_summary(model(accelerator="g5"), budgets) is None
