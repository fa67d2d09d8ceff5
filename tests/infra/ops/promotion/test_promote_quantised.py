"""Promoting quantised variants: refused where the serving stack has no pool that runs them, or no recipe builds
them, or their data is missing; once built, judged by the quality gate (manifest figures, alias moved only
within budget, a failed gate marking the version), with the in-memory registry and against the moto server."""

from __future__ import annotations

import re

import pytest

from infra.core.errors import InputError
from infra.ops.promotion.evaluate import Comparison
from infra.ops.promotion.promote import promote
from infra.ops.promotion.quality import Budget
from infra.ops.promotion.request import Promotion, promotion
from infra.ops.promotion.s3 import S3Store
from infra.serving.variants import VARIANTS
from tests.infra.ops.lifecycle.recording import FakeClock, RecordingStacks, printed, runtime
from tests.infra.ops.promotion.standins import BUCKET, RUN_ID, Cluster, MemoryStore, promotion_world, seed_run

ALIAS = "models/mistral-7b/aliases/production.json"
EVALS = "datasets/evals/facts/"
CALIBRATION = "datasets/calibration/prose/"


def figures(ppl_variant: float, em_variant: float) -> dict:
    """quality.json as evaluate.py writes it: 24 tasks, the reference at 0.875 exact match and perplexity 8."""
    return Comparison(
        sequences=6,
        tokens=450,
        perplexity_reference=8.0,
        perplexity_variant=ppl_variant,
        perplexity_increase=ppl_variant / 8.0 - 1,
        perplexity_increase_ci95=(ppl_variant / 8.0 - 1.01, ppl_variant / 8.0 - 0.99),
        tasks=24,
        exact_match_reference=0.875,
        exact_match_variant=em_variant,
        exact_match_reference_ci95=(0.69, 0.96),
        exact_match_variant_ci95=(0.5, 0.9),
        task_drop=0.875 - em_variant,
        task_drop_ci95=(0.0, 0.1),
    ).as_dict()


def request(variants=("cuda", "cuda-int4"), version="v2", **more) -> Promotion:
    data = {"calibration": CALIBRATION, "evaluation": EVALS}
    return Promotion(RUN_ID, "mistral-7b", version, variants, **{**data, **more})


def world_with(store):
    seed_run(store.put, RUN_ID)
    store.put(EVALS + "tasks.jsonl", b'{"prompt": "code of amber is", "answer": "840."}\n')
    store.put(CALIBRATION + "prose.jsonl", b'{"text": "the registry keeps every version"}\n')
    world = promotion_world()
    return Cluster(store), world, RecordingStacks(world), runtime(FakeClock())


def run(store, req: Promotion, quality: dict | None = None, dry_run: bool = False, gated: str = "cuda-int4"):
    cluster, world, stacks, rt = world_with(store)
    if quality is not None:
        cluster.quality[gated] = quality
    code = promote(req, stacks, lambda bucket, region: store, lambda stack: cluster, rt, dry_run)
    return code, world, rt


def test_fp8_is_refused_on_a_stack_whose_pools_cannot_run_it():
    with pytest.raises(InputError) as caught:
        run(MemoryStore(), request(("cuda", "cuda-fp8")))
    assert [str(p) for p in caught.value.problems] == [
        "--variants: cuda-fp8 (weights fp8, activations fp8, KV cache bf16) cannot run on any node pool of stack "
        "serving-demo (inf2, g5); pools that can: g6 (L4), g6e (L40S), l4 (gcp L4)"
    ]


def test_a_variant_no_recipe_builds_is_refused_before_anything_is_written(monkeypatch):
    """Every variant has a recipe now; one without (a variant declared before its recipe) is still refused."""
    from infra.ops.promotion import gate

    monkeypatch.setattr(gate, "RECIPES", {k: v for k, v in gate.RECIPES.items() if k != "neuron-int8"})
    store = MemoryStore()
    with pytest.raises(InputError) as caught:
        run(store, request(("cuda", "neuron-int8")))
    assert [str(p) for p in caught.value.problems] == [
        "--variants: neuron-int8 would run on inf2, but this mlinfra has no conversion recipe for it "
        '(docs/registry-and-promotion.md, "Quantised variants"); it builds neuron, cuda, cuda-fp8, cuda-int8, '
        "cuda-int4"
    ]
    assert not [k for k in store.writes if k.startswith("models/")]


def test_neuron_int8_is_planned_on_inf2_with_its_evaluation_on_the_host_cpu():
    """promote --dry-run --variants cuda,neuron,neuron-int8 on the demo stack (inf2, g5; mistral-7b is served as
    cuda there, so cuda is built too): both Neuron conversions on inf2, and neuron-int8's evaluation Job there."""
    store = MemoryStore()
    code, _, rt = run(store, request(("cuda", "neuron", "neuron-int8")), dry_run=True)
    text = "\n".join(printed(rt))
    assert code == 0 and not [k for k in store.writes if k.startswith("models/")]
    for variant in ("neuron", "neuron-int8"):
        assert f"job models/convert-mistral-7b-v2-{variant}: {variant} on inf2 (aws.amazon.com/neuron: 1, cpu 4, " in (
            text
        )
    assert (
        "measures the bf16 reference on inf2 (aws.amazon.com/neuron: 1, cpu 2, memory 9Gi, disk 11Gi; one model, on "
        "the host CPU), image public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.16.0-neuronx-py312-sdk2.31.1-"
        "ubuntu24.04; reads "
    ) in text
    assert "job models/evaluate-mistral-7b-v2-neuron-int8: evaluates neuron-int8 against those figures" in text
    assert "evaluate-mistral-7b-v2-neuron:" not in text  # a bf16 variant has no evaluation


def test_the_quantised_variants_the_stack_can_run_are_planned_and_the_rest_refused():
    """promote --variants cuda-int4,cuda-fp8 on the demo stack (inf2, g5): fp8 needs fp8 compute, g5 has none."""
    with pytest.raises(InputError) as caught:
        run(MemoryStore(), request(("cuda", "cuda-int4", "cuda-fp8")))
    assert [str(p) for p in caught.value.problems] == [
        "--variants: cuda-fp8 (weights fp8, activations fp8, KV cache bf16) cannot run on any node pool of stack "
        "serving-demo (inf2, g5); pools that can: g6 (L4), g6e (L40S), l4 (gcp L4)"
    ]
    store = MemoryStore()
    code, _, rt = run(store, request(("cuda", "cuda-int4", "cuda-int8")), dry_run=True)
    text = "\n".join(printed(rt))
    assert code == 0 and not [k for k in store.writes if k.startswith("models/")]
    for variant in ("cuda-int4", "cuda-int8"):
        assert f"job models/convert-mistral-7b-v2-{variant}: {variant} on g5 (nvidia.com/gpu: 1, cpu 2, memory " in text
        assert f"job models/evaluate-mistral-7b-v2-{variant}: evaluates {variant} against those figures" in text
    # both are evaluated in the converter image on g5: one reference Job measures the reference for both
    assert text.count("measures the bf16 reference on g5") == 2  # printed with each variant, the same Job
    assert len(set(re.findall(r"job models/(evaluate-mistral-7b-v2-reference-[\w-]+)", text))) == 1


def test_quantised_variants_need_registry_data_named_in_the_request():
    with pytest.raises(InputError) as caught:
        promotion(RUN_ID, "mistral-7b", "v2", "cuda,cuda-int4", "production", "serving-demo")
    assert [str(p) for p in caught.value.problems] == [
        "--eval-data: required for cuda-int4: the quality gate's fixed evaluation, a prefix datasets/evals/<name>/ of "
        "the registry holding held-out.jsonl and tasks.jsonl",
        "--calibration-data: required for cuda-int4: the quantiser's calibration samples, a prefix "
        "datasets/calibration/<name>/ of the registry",
    ]
    # cuda-int4 (AWQ) and cuda-int8 (SmoothQuant, GPTQ) are the variants whose quantiser reads calibration data
    assert [v.name for v in VARIANTS.values() if v.calibrated] == ["cuda-int4", "cuda-int8"]
    with pytest.raises(InputError) as caught:
        promotion(RUN_ID, "mistral-7b", "v2", "cuda,cuda-int4", "production", "serving-demo", evaluation=EVALS)
    assert [str(p) for p in caught.value.problems] == [
        "--calibration-data: required for cuda-int4: the quantiser's calibration samples, a prefix "
        "datasets/calibration/<name>/ of the registry",
    ]
    made = promotion(RUN_ID, "mistral-7b", "v2", "cuda,cuda-fp8", "production", "serving-demo", evaluation=EVALS)
    assert made.calibration is None  # FP8_DYNAMIC rounds to nearest: none needed
    with pytest.raises(InputError) as caught:
        promotion(
            RUN_ID,
            "mistral-7b",
            "v2",
            "cuda",
            "production",
            "serving-demo",
            evaluation="https://huggingface.co/datasets/x",
            max_task_drop=5,
        )
    assert [str(p) for p in caught.value.problems] == [
        "--max-task-drop: 5 is not a share from 0 to 1 (0.05: exact match at most 5 points below the reference's)",
        "--eval-data: a registry prefix datasets/evals/<name>/ (lowercase letters, digits, '.', '_', '-'), not "
        "'https://huggingface.co/datasets/x'",
    ]
    made = promotion(RUN_ID, "mistral-7b", "v2", "cuda,neuron-int8", "production", "serving-demo", evaluation=EVALS)
    assert made.budget == Budget(0.05, 0.05) and made.evaluation == EVALS and made.calibration is None


def test_the_plan_shows_the_calibration_data_cuda_int4_reads_and_its_job_fetches_it():
    store = MemoryStore()
    cluster, _, stacks, rt = world_with(store)
    code = promote(request(), stacks, lambda b, r: store, lambda s: cluster, rt, True)
    lines = printed(rt)
    assert code == 0 and not cluster.applied
    assert (
        "  job models/convert-mistral-7b-v2-cuda-int4: cuda-int4 on g5 (nvidia.com/gpu: 1, cpu 2, memory 11Gi, disk "
        "11Gi), image 123456789012.dkr.ecr.us-east-1.amazonaws.com/mlinfra-converter:0.33.0-llmc0.14.0.1 "
        "(llm-compressor), then docker.io/vllm/vllm-openai:v0.33.0 (check); reads "
        "checkpoints/llama-ft-007/step-1000/ + "
        f"{CALIBRATION} (calibration data), writes models/mistral-7b/v2/cuda-int4/ + "
        "models/mistral-7b/v2/cuda-int4/manifest.json"
    ) in lines
    assert "read its checkpoint run (and its calibration data) and write its variant prefix only" in "\n".join(lines)
    assert not [line for line in lines if "convert-mistral-7b-v2-cuda:" in line and "calibration" in line]  # bf16
    cluster.quality["cuda-int4"] = figures(ppl_variant=8.2, em_variant=0.875)
    assert promote(request(), stacks, lambda b, r: store, lambda s: cluster, rt) == 0
    job = next(o for o in cluster.applied if o["metadata"]["name"] == "convert-mistral-7b-v2-cuda-int4")
    fetch = next(c for c in job["spec"]["template"]["spec"]["initContainers"] if c["name"] == "fetch")
    assert fetch["command"][-1].endswith(
        f"aws s3 sync --only-show-errors s3://{BUCKET}/{CALIBRATION} /work/calibration\n"
    )


def test_a_calibration_prefix_too_long_for_the_session_policy_is_refused():
    store = MemoryStore()
    long = "datasets/calibration/" + "/".join(["c" * 60] * 20) + "/"
    store.put(long + "calibration.jsonl", b'{"text": "the registry keeps every version"}\n')
    with pytest.raises(InputError) as caught:
        run(store, request(calibration=long))
    [problem] = caught.value.problems
    assert str(problem).startswith(f"--calibration-data: {long}: session policy is ")
    assert str(problem).endswith("characters, over the 2048 STS allows; use a shorter prefix")
    assert not [k for k in store.writes if k.startswith("models/")]


def test_data_the_registry_does_not_hold_is_refused():
    store = MemoryStore()
    with pytest.raises(InputError) as caught:
        run(store, request(evaluation="datasets/evals/missing/"))
    assert [str(p) for p in caught.value.problems] == [
        f"--eval-data: s3://{BUCKET}/datasets/evals/missing/ holds no object; upload the data there first"
    ]


def test_a_variant_within_budget_carries_its_figures_and_the_alias_moves():
    store = MemoryStore()
    code, world, _ = run(store, request(), figures(ppl_variant=8.2, em_variant=0.875))
    assert code == 0 and store.json(ALIAS)["version"] == "v2"
    block = store.json("models/mistral-7b/v2/cuda-int4/manifest.json")["quality"]
    assert block["method"].startswith("W4A16 AWQ (llm-compressor): activation-aware scales") and block["passed"] is True
    assert block["precision"] == {"weights": "int4", "activations": "fp16", "kvCache": "fp16"}
    assert block["budget"] == {"maxPerplexityIncrease": 0.05, "maxTaskDrop": 0.05}
    assert block["data"] == {"calibration": CALIBRATION, "evaluation": EVALS}  # AWQ read the calibration data
    assert block["figures"]["perplexity"]["increase"] == 0.025 and block["figures"]["exactMatch"]["tasks"] == 24
    assert "quality" not in store.json("models/mistral-7b/v2/cuda/manifest.json")  # bf16: no gate


@pytest.mark.parametrize(("em_variant", "passed"), [(0.875, True), (0.625, False)])
def test_neuron_int8_is_gated_like_the_others(em_variant, passed):
    """The NxD Inference variant's Jobs run (on inf2), its evaluation's figures go into its manifest; out of budget,
    the version is marked and the alias stays."""
    store = MemoryStore()
    req = request(("cuda", "neuron-int8"))
    code, _, _ = run(store, req, figures(ppl_variant=8.1, em_variant=em_variant), gated="neuron-int8")
    manifest = store.json("models/mistral-7b/v2/neuron-int8/manifest.json")
    block = manifest["quality"]
    assert block["passed"] is passed and block["method"].startswith("INT8 weight-only, per-channel symmetric")
    assert block["precision"] == {"weights": "int8", "activations": "bf16", "kvCache": "bf16"}
    overrides = manifest["engine"]["additional_config"]["override_neuron_config"]
    assert overrides["quantized_checkpoints_path"] == "/models/neuron-quantized"
    if passed:
        assert code == 0 and store.json(ALIAS)["version"] == "v2"
    else:
        assert code == 1 and store.get(ALIAS) is None
        assert store.get("models/mistral-7b/v2/neuron-int8/_FAILED") is not None


def test_a_variant_out_of_budget_marks_the_version_and_the_alias_stays():
    store = MemoryStore()
    code, world, rt = run(store, request(), figures(ppl_variant=8.1, em_variant=0.625))
    assert code == 1 and store.get(ALIAS) is None
    assert store.json("models/mistral-7b/v2/cuda-int4/_FAILED")["reason"] == (
        "quality gate: exact match 62.5% is 25.0 points below the reference's 87.5% over 24 tasks (budget 5.0 points)"
    )
    assert store.get("models/mistral-7b/v2/cuda/_FAILED") is not None  # no variant of a failed version is served
    assert store.json("models/mistral-7b/v2/cuda-int4/manifest.json")["quality"]["passed"] is False
    assert not [c for c in world.calls if c[0] in ("set_config", "up")]
    assert "promotion failed: mistral-7b@production stays at nothing" in "\n".join(printed(rt))


def test_a_looser_budget_passes_the_same_figures():
    store = MemoryStore()
    code, _, _ = run(store, request(budget=Budget(0.05, 0.3)), figures(ppl_variant=8.1, em_variant=0.625))
    assert code == 0 and store.json(ALIAS)["version"] == "v2"


def test_a_quantised_variant_without_figures_fails():
    store = MemoryStore()
    code, _, _ = run(store, request(), None)
    assert code == 1 and store.get(ALIAS) is None
    assert store.json("models/mistral-7b/v2/cuda-int4/_FAILED")["reason"] == (
        "quality gate: the evaluation left no models/mistral-7b/v2/cuda-int4/quality.json"
    )


def test_against_moto_a_failed_gate_leaves_the_alias_unmoved(bucket, aws):
    store = S3Store(bucket, session=aws.session)
    code, _, _ = run(store, request(version="v1"), figures(ppl_variant=8.2, em_variant=0.875))
    assert code == 0
    code, _, _ = run(store, request(version="v2"), figures(ppl_variant=9.6, em_variant=0.875))
    assert code == 1
    alias = aws.s3.get_object(Bucket=bucket, Key=ALIAS)
    import json

    assert json.loads(alias["Body"].read())["version"] == "v1"
    failed = json.loads(aws.s3.get_object(Bucket=bucket, Key="models/mistral-7b/v2/cuda-int4/_FAILED")["Body"].read())
    assert failed["reason"] == (
        "quality gate: held-out perplexity 9.600 is 20.0% above the reference's 8.000 (budget 5.0%)"
    )
    manifest = json.loads(
        aws.s3.get_object(Bucket=bucket, Key="models/mistral-7b/v1/cuda-int4/manifest.json")["Body"].read()
    )
    assert manifest["quality"]["passed"] is True and manifest["quality"]["figures"]["perplexity"]["variant"] == 8.2


def test_a_variant_is_built_on_a_declared_pool_that_runs_it_when_its_recipes_pool_is_absent():
    """cuda-fp8's recipe names g6; a stack with g6e (L40S) but no g6 builds and checks it on g6e."""
    store = MemoryStore()
    cluster, world, stacks, rt = world_with(store)
    serving = world.stacks["serving-demo"].config["mlinfra:serving"]
    serving["nodePools"]["g6e"] = {"instanceTypes": ["g6e.xlarge", "g6e.2xlarge"], "minSize": 0, "maxSize": 1}
    code = promote(request(("cuda", "cuda-fp8")), stacks, lambda b, r: store, lambda s: cluster, rt, True)
    text = "\n".join(printed(rt))
    assert code == 0
    assert "job models/convert-mistral-7b-v2-cuda-fp8: cuda-fp8 on g6e (nvidia.com/gpu: 1, cpu 2, memory " in text
    assert "job models/evaluate-mistral-7b-v2-cuda-fp8: evaluates cuda-fp8 against those figures" in text
    assert "measures the bf16 reference on g6e" in text
    cluster.quality["cuda-fp8"] = figures(ppl_variant=8.2, em_variant=0.875)
    code = promote(request(("cuda", "cuda-fp8")), stacks, lambda b, r: store, lambda s: cluster, rt)
    job = next(o for o in cluster.applied if o["metadata"]["name"] == "convert-mistral-7b-v2-cuda-fp8")
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"mlinfra.io/accelerator": "g6e"}
    assert job["metadata"]["labels"]["mlinfra.io/accelerator"] == "g6e"
    assert code == 0 and store.json("models/mistral-7b/v2/cuda-fp8/manifest.json")["hardware"]["accelerator"] == "g6e"


def test_a_stack_without_a_converter_image_is_refused_before_anything_starts():
    store = MemoryStore()
    cluster, world, stacks, rt = world_with(store)
    del world.stacks["serving-demo"].config["mlinfra:serving"]["converterImage"]
    with pytest.raises(InputError) as caught:
        promote(request(("cuda", "cuda-int4", "cuda-int8")), stacks, lambda b, r: store, lambda s: cluster, rt, True)
    assert [str(p) for p in caught.value.problems] == [
        "mlinfra:serving.converterImage: cuda-int4, cuda-int8 are built by llm-compressor in the converter image, "
        "and stack serving-demo names none: build images/converter/Dockerfile, push it where the cluster pulls from "
        "and set its reference (pinned by tag or digest)"
    ]
    assert not cluster.applied and not [k for k in store.writes if k.startswith("models/")]
    # the bf16 variant alone needs no converter
    assert promote(request(("cuda",)), stacks, lambda b, r: store, lambda s: cluster, rt, True) == 0
