"""A Neuron artefact is compiled for the shape of the stack's entry that will serve it, even when that entry follows
no alias (the demo's pinned llama-3-8b-neuron); the server refuses one compiled for another shape
(tests/infra/serving/test_serving_manifests.py)."""

from __future__ import annotations

from infra.ops.promotion.promote import promote
from infra.ops.promotion.request import Promotion
from tests.infra.ops.lifecycle.recording import printed
from tests.infra.ops.promotion.standins import RUN_ID, MemoryStore
from tests.infra.ops.promotion.test_promote_quantised import world_with

MODEL = "llama-3-8b-neuron"  # models[0] of serving-demo: pinned, follows no alias


def dry_run(entry: dict):
    store = MemoryStore()
    cluster, world, stacks, rt = world_with(store)
    world.stacks["serving-demo"].config["mlinfra:serving"]["models"][0].update(entry)
    req = Promotion(RUN_ID, MODEL, "2026-03-01", ("neuron",))
    code = promote(req, stacks, lambda bucket, region: store, lambda stack: cluster, rt, True)
    return code, "\n".join(printed(rt))


def test_a_pinned_neuron_entry_gets_an_artefact_compiled_for_its_own_max_model_len():
    code, text = dry_run({"maxModelLen": 8192})
    assert code == 0
    assert (
        "built and load-checked for the server's engine: tensor_parallel_size=2, max_num_seqs=8, "
        "max_model_len=8192, dtype=bfloat16, enable_prefix_caching=False, num_gpu_blocks_override=8"
    ) in text
