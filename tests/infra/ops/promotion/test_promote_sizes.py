"""promote --dry-run at real model sizes. An 8B model's bf16 checkpoint (8.03 billion parameters x 2 bytes: two
8.03 GB files, 16.06 GB, 14.96 GiB; sizes only, no weights) plans each variant's conversion and evaluation with
memory, disk and device memory that hold it, on the demo's pools (and a g6 pool for fp8). A 70B model's
evaluation, whose model no device of the pool holds, is refused before anything starts, naming the figures and
a type whose devices would."""

from __future__ import annotations

import re

import pytest

from infra.core.errors import InputError
from infra.ops.promotion.promote import promote
from tests.infra.ops.lifecycle.recording import printed
from tests.infra.ops.promotion.standins import RUN_ID, MemoryStore
from tests.infra.ops.promotion.test_promote_quantised import request, world_with

EIGHT_B = 8_030_000_000  # bytes per file: two of them, an 8B model in bf16
SEVENTY_B = 70_000_000_000  # two of them: a 70B model in bf16


def dry_run(variants: tuple[str, ...], file_bytes: int) -> str:
    store = MemoryStore()
    cluster, world, stacks, rt = world_with(store)
    for key in [k for k in store.versions if k.startswith(f"checkpoints/{RUN_ID}/step-1000/")]:
        store.sizes[key] = file_bytes
    pools = world.stacks["serving-demo"].config["mlinfra:serving"]["nodePools"]
    pools["g6"] = {"instanceTypes": ["g6.xlarge", "g6.2xlarge"], "minSize": 0, "maxSize": 2}
    code = promote(request(variants), stacks, lambda bucket, region: store, lambda stack: cluster, rt, True)
    assert code == 0 and cluster.calls == [] and not [k for k in store.writes if k.startswith("models/")]
    return "\n".join(printed(rt))


@pytest.mark.parametrize("variant", ["cuda", "cuda-int8", "cuda-int4", "cuda-fp8", "neuron", "neuron-int8"])
def test_an_8b_checkpoint_plans_every_job_with_memory_that_holds_it(variant):
    text = dry_run(tuple(dict.fromkeys(("cuda", variant))), EIGHT_B)  # the stack serves cuda: always built
    checkpoint_gib = 2 * EIGHT_B / 2**30
    (job,) = re.findall(rf"job models/convert-mistral-7b-v2-{variant}: .*? memory (\d+)Gi, disk (\d+)Gi\)", text)
    memory, disk = (int(x) for x in job)
    assert disk >= 2 * checkpoint_gib  # the checkpoint and the artefact on the work volume
    assert memory >= (1 if variant.startswith("neuron") else 0.25) * checkpoint_gib  # what its loader reads through
    evaluations = re.findall(
        rf"then job models/evaluate-mistral-7b-v2-reference-.*? memory (\d+)Gi, disk (\d+)Gi; one model, "
        rf"(on the host CPU|[\d.]+ GiB on one device)\).*\n.*then job models/evaluate-mistral-7b-v2-{variant}: ",
        text,
    )
    if variant in ("cuda", "neuron"):
        assert evaluations == []  # a bf16 variant has no quality gate
        return
    # One model in memory: 14.96 GiB + 8, never the server's 10 GiB default; the work volume holds that one model
    # (the reference, or the variant against its figures); on a GPU the model (+ 2 GiB) on one 22 GiB A10G or L4.
    where = "on the host CPU" if variant == "neuron-int8" else "17.0 GiB on one device"
    assert evaluations == [("23", "25", where)]


def test_a_70b_evaluation_no_device_of_the_pool_holds_is_refused_before_anything_starts():
    with pytest.raises(InputError) as refused:
        dry_run(("cuda", "cuda-int4"), SEVENTY_B)
    lines = [str(problem) for problem in refused.value.problems]
    assert lines[2:4] == [
        "mlinfra:serving.nodePools.g5: variant cuda-int4 needs 1 accelerator, 2 CPU, 139 GiB memory and 141 GiB disk "
        "to evaluate its 130.4 GiB reference, then itself, one model at a time; no instance type of node pool g5 "
        "(g5.xlarge, g5.2xlarge; diskGib 200, 140 GiB usable) holds it: g5.12xlarge would (add it to "
        "instanceTypes); diskGib 202 would hold the work volume",
        "mlinfra:serving.nodePools.g5: variant cuda-int4 needs 132.4 GiB on one device to evaluate its 130.4 GiB "
        "reference, then itself, one model at a time; the largest device of node pool g5 (g5.xlarge, g5.2xlarge): "
        "A10G, 22.4 GiB; a pool of p5e.48xlarge (H200, 141.0 GiB per device) would hold it",
    ]
    assert lines[0].startswith("mlinfra:serving.nodePools.g5: variant cuda needs 1 accelerator")  # the conversions


def test_default_variants_that_need_data_name_where_they_came_from():
    store = MemoryStore()
    cluster, world, stacks, rt = world_with(store)
    world.stacks["serving-demo"].config["mlinfra:serving"]["models"][1]["variant"] = "cuda-int4"
    req = request((), calibration=None)
    with pytest.raises(InputError) as refused:
        promote(req, stacks, lambda bucket, region: store, lambda stack: cluster, rt, True)
    assert [str(p) for p in refused.value.problems] == [
        "--calibration-data: required for cuda-int4: the quantiser's calibration samples, a prefix "
        "datasets/calibration/<name>/ of the registry (the variants stack serving-demo serves mistral-7b as)"
    ]
    assert cluster.calls == [] and not [k for k in store.writes if k.startswith("models/")]
