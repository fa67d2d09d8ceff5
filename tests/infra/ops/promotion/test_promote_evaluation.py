"""promote's evaluation Jobs, end to end with the scripted cluster: created only after a quantised variant's
conversion succeeded, on its serving pool; the gate judged only on what the evaluation wrote; a failed or stuck
evaluation fails the version like a failed conversion (in memory and against the moto registry)."""

from __future__ import annotations

import json

import pytest

from infra.core.errors import InputError
from infra.ops.promotion.promote import promote
from infra.ops.promotion.s3 import S3Store
from tests.infra.ops.lifecycle.recording import printed
from tests.infra.ops.promotion.standins import BUCKET, MemoryStore
from tests.infra.ops.promotion.test_promote_quantised import ALIAS, EVALS, figures, request, world_with

INT4 = "models/mistral-7b/v2/cuda-int4/"
PASSING = figures(ppl_variant=8.2, em_variant=0.875)


def run(store, req=None, quality=PASSING, evaluation=None, outcome=None, dry_run=False):
    cluster, world, stacks, rt = world_with(store)
    if quality is not None:
        cluster.quality["cuda-int4"] = quality
    cluster.evaluation.update(evaluation or {})
    cluster.outcome.update(outcome or {})
    code = promote(req or request(), stacks, lambda bucket, region: store, lambda stack: cluster, rt, dry_run)
    return code, cluster, world, rt


def created(cluster) -> list[str]:
    return [name for call in cluster.calls if call[0] == "create" for _, name in call[1]]


def test_the_evaluation_job_starts_after_the_conversions_and_the_gate_judges_what_it_wrote():
    store = MemoryStore()
    code, cluster, _, rt = run(store)
    assert code == 0 and store.json(ALIAS)["version"] == "v2"
    *converted, reference, evaluated = created(cluster)
    assert converted == ["convert-mistral-7b-v2-cuda", "convert-mistral-7b-v2-cuda-int4"]
    # the reference measured once where cuda-int4 is evaluated, then the quantised variant only
    assert (
        reference.startswith("evaluate-mistral-7b-v2-reference-g5-") and evaluated == "evaluate-mistral-7b-v2-cuda-int4"
    )
    figures_at = cluster.applied[-2]["metadata"]["annotations"]["mlinfra.io/target"].split(",")[0].split("/", 3)[3]
    assert figures_at.startswith("models/mistral-7b/v2/reference/g5-") and figures_at.endswith("/figures.json")
    # the variant's Job reads the figures its reference Job kept (the stand-in asserts they are there)
    assert cluster.applied[-1]["metadata"]["annotations"]["mlinfra.io/reference-figures"] == (
        f"s3://{BUCKET}/{figures_at.removesuffix('figures.json')}"
    )
    # created once both conversions had succeeded
    first_eval = next(i for i, c in enumerate(cluster.calls) if c[0] == "create" and "evaluate" in c[1][0][1])
    conversion_states = [c for c in cluster.calls[:first_eval] if c[0] == "state"]
    assert {c[2] for c in conversion_states} == {"convert-mistral-7b-v2-cuda", "convert-mistral-7b-v2-cuda-int4"}
    # quality.json was written by the evaluation Job, before the manifest that carries its figures
    assert store.writes.index(INT4 + "quality.json") < store.writes.index(INT4 + "manifest.json")
    block = store.json(INT4 + "manifest.json")["quality"]
    assert block["figures"] == PASSING and block["passed"] is True
    assert block["job"] == "evaluate-mistral-7b-v2-cuda-int4" and block["accelerator"] == "g5"
    assert block["referenceJob"] == reference
    job = cluster.applied[-1]
    assert job["metadata"]["labels"]["app.kubernetes.io/name"] == "model-evaluation"
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {"mlinfra.io/accelerator": "g5"}
    assert job["metadata"]["annotations"]["mlinfra.io/evaluation-data"] == f"s3://{BUCKET}/{EVALS}"
    assert (
        "started job models/evaluate-mistral-7b-v2-cuda-int4 (evaluates cuda-int4 against the bf16 reference's figures)"
    ) in printed(rt)


def test_a_failed_evaluation_marks_the_version_and_the_alias_stays():
    store = MemoryStore()
    code, _, world, rt = run(store, evaluation={"cuda-int4": "failed"})
    assert code == 1 and store.get(ALIAS) is None
    assert store.json(INT4 + "_FAILED")["reason"] == (
        "evaluation job evaluate-mistral-7b-v2-cuda-int4 failed: PodFailurePolicy: Container evaluate for pod "
        "models/x exited with code 1"
    )
    assert store.get("models/mistral-7b/v2/cuda/_FAILED") is not None and store.get(INT4 + "manifest.json") is None
    assert store.json("models/mistral-7b/v2/_FAILED")["variants"] == {
        "cuda-int4": store.json(INT4 + "_FAILED")["reason"]
    }
    assert not [c for c in world.calls if c[0] in ("set_config", "up")]
    assert "promotion failed: mistral-7b@production stays at nothing" in "\n".join(printed(rt))


def test_an_evaluation_nobody_can_schedule_fails_after_30_minutes_and_is_deleted():
    store = MemoryStore()
    code, cluster, _, rt = run(store, evaluation={"cuda-int4": "unschedulable"})
    assert code == 1 and store.get(ALIAS) is None
    assert ("delete", "models", "evaluate-mistral-7b-v2-cuda-int4") in cluster.calls
    reason = store.json(INT4 + "_FAILED")["reason"]
    assert reason.startswith("evaluation job evaluate-mistral-7b-v2-cuda-int4 failed: its pod could not be scheduled")
    assert "for 30m" in reason or "30m" in reason, reason


def test_ctrl_c_while_evaluating_deletes_the_evaluation_job_and_marks_the_version():
    store = MemoryStore()
    cluster, _, stacks, rt = world_with(store)
    cluster.quality["cuda-int4"] = PASSING
    # 4 state checks convert both variants, 2 measure the reference; the variant's second is Ctrl-C
    cluster.interrupt_after = 7
    with pytest.raises(KeyboardInterrupt):
        promote(request(), stacks, lambda bucket, region: store, lambda stack: cluster, rt)
    assert ("delete", "models", "evaluate-mistral-7b-v2-cuda-int4") in cluster.calls
    # finished: kept
    assert not [
        c for c in cluster.calls if c[0] == "delete" and c[2].startswith(("convert-", "evaluate-mistral-7b-v2-ref"))
    ]
    assert store.json(INT4 + "_FAILED")["reason"] == "promotion stopped (interrupted)"
    assert store.get(ALIAS) is None and store.get(INT4 + "manifest.json") is None


def test_a_failed_conversion_is_not_evaluated():
    store = MemoryStore()
    code, cluster, _, _ = run(store, outcome={"cuda": "failed"})
    assert code == 1
    assert not [n for n in created(cluster) if n.startswith("evaluate-")]
    assert store.json(INT4 + "_FAILED")["reason"] == "not evaluated: variant cuda failed"
    assert store.get(INT4 + "quality.json") is None


def test_an_evaluation_that_writes_nothing_fails_the_gate():
    store = MemoryStore()
    code, cluster, _, _ = run(store, quality=None)
    assert code == 1 and "evaluate-mistral-7b-v2-cuda-int4" in created(cluster)
    assert store.json(INT4 + "_FAILED")["reason"] == (
        "quality gate: the evaluation left no models/mistral-7b/v2/cuda-int4/quality.json"
    )


def test_dry_run_prints_the_evaluation_jobs():
    store = MemoryStore()
    code, cluster, _, rt = run(store, dry_run=True)
    assert code == 0 and cluster.calls == [] and not [k for k in store.writes if k.startswith("models/")]
    text = printed(rt)
    [reference] = [line for line in text if "then job models/evaluate-mistral-7b-v2-reference-g5-" in line]
    place = reference.split("(once for the variants evaluated at ")[1].split(")")[0]
    figures_at = f"models/mistral-7b/v2/reference/{place}/"
    assert reference == (
        f"    then job models/evaluate-mistral-7b-v2-reference-{place} (once for the variants evaluated at {place}): "
        "measures the bf16 reference on g5 (nvidia.com/gpu: 1, cpu 2, memory 9Gi, disk 11Gi; one model, 2.0 GiB on one "
        "device), image 123456789012.dkr.ecr.us-east-1.amazonaws.com/mlinfra-converter:0.33.0-llmc0.14.0.1 (tasks by "
        f"lm-eval); reads checkpoints/llama-ft-007/step-1000/ + {EVALS}, writes {figures_at}"
    )
    assert (
        "    then job models/evaluate-mistral-7b-v2-cuda-int4: evaluates cuda-int4 against those figures, the same "
        f"way; reads {INT4} + {EVALS} + {figures_at}, writes {INT4}quality.json"
    ) in text
    assert (
        "    quality gate: held-out perplexity at most 5.0% above the reference's, exact match at most 5.0 points "
        "below it"
    ) in text
    assert not [line for line in text if "evaluate-mistral-7b-v2-cuda:" in line]  # bf16: no evaluation


def test_an_evaluation_prefix_too_long_for_the_session_policy_is_refused():
    store = MemoryStore()
    long = "datasets/evals/" + "/".join(["e" * 60] * 20) + "/"
    store.put(long + "tasks.jsonl", b'{"prompt": "a", "answer": "b"}\n')
    with pytest.raises(InputError) as caught:
        run(store, request(evaluation=long))
    [problem] = caught.value.problems
    assert str(problem).startswith(f"--eval-data: {long}: session policy is ")
    assert str(problem).endswith("characters, over the 2048 STS allows; use a shorter prefix")
    assert not [k for k in store.writes if k.startswith("models/")]


def test_against_moto_a_failed_evaluation_leaves_the_alias_where_it_was(bucket, aws):
    store = S3Store(bucket, session=aws.session)
    code, *_ = run(store, request(version="v1"))
    assert code == 0
    code, *_ = run(store, request(version="v2"), evaluation={"cuda-int4": "failed"})
    assert code == 1

    def body(key: str):
        return json.loads(aws.s3.get_object(Bucket=bucket, Key=key)["Body"].read())

    assert body(ALIAS)["version"] == "v1"
    assert body("models/mistral-7b/v2/cuda-int4/_FAILED")["reason"].startswith(
        "evaluation job evaluate-mistral-7b-v2-cuda-int4 failed"
    )
    assert body("models/mistral-7b/v1/cuda-int4/quality.json") == PASSING
    listed = aws.s3.list_objects_v2(Bucket=bucket, Prefix="models/mistral-7b/v2/cuda-int4/")
    assert "models/mistral-7b/v2/cuda-int4/manifest.json" not in {o["Key"] for o in listed.get("Contents", [])}
