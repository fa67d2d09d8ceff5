"""Promote and rollback against recording stand-ins: in-memory registry, scripted cluster, recorded stacks."""
from __future__ import annotations

import json

import pytest

from infra.errors import InputError
from infra.promotion import access, registry
from infra.promotion.promote import promote, rollback
from infra.promotion.request import Promotion, Rollback
from tests.lifecycle.recording import FakeClock, RecordingStacks, printed, runtime
from tests.promotion.standins import BUCKET, CONVERTER_ROLE_ARN, KEY_ARN, RUN_ID, Cluster, MemoryStore, \
    credential_process_argv, promotion_world, seed_run

VERSION_PATH = "mlinfra:serving.models[1].version"  # mistral-7b follows `production` in serving-demo
ALIAS = "models/mistral-7b/aliases/production.json"


@pytest.fixture
def setup():
    store = MemoryStore()
    seed_run(store.put, RUN_ID)
    store.writes.clear()
    world = promotion_world()
    return store, Cluster(store), world, RecordingStacks(world), runtime(FakeClock())


def _promote(setup, version="v2", variants=("cuda", "neuron"), dry_run=False, run_id=RUN_ID):
    store, cluster, _, stacks, rt = setup
    seen = []
    code = promote(Promotion(run_id, "mistral-7b", version, variants), stacks,
                   lambda bucket, region: seen.append((bucket, region)) or store, lambda stack: cluster, rt, dry_run)
    assert seen == [(BUCKET, "us-east-1")]
    return code


def _served(world) -> str:
    return world.stacks["serving-demo"].config["mlinfra:serving"]["models"][1]["version"]


def test_success_writes_manifests_then_moves_the_alias_then_rolls_out(setup):
    store, cluster, world, _, rt = setup
    assert _promote(setup) == 0
    manifests = [k for k in store.writes if k.endswith("manifest.json")]
    assert manifests == ["models/mistral-7b/v2/cuda/manifest.json", "models/mistral-7b/v2/neuron/manifest.json"]
    assert store.writes.index(ALIAS) > max(store.writes.index(k) for k in manifests)
    assert store.json(ALIAS)["version"] == "v2"
    manifest = store.json(manifests[1])
    assert manifest["source"]["checkpoint"] == f"s3://{BUCKET}/checkpoints/{RUN_ID}/step-1000/"
    assert manifest["hardware"]["accelerator"] == "inf2" and manifest["compilerVersion"] == "neuronx-cc 2.19"
    assert [c[:3] for c in world.calls if c[0] in ("set_config", "up")] == [
        ("set_config", "serving-demo", VERSION_PATH), ("up", "serving-demo")]
    assert _served(world) == "v2"
    assert [k for k in store.versions if k.endswith("_FAILED")] == []
    assert any(line.startswith("converting | ") and "cuda running" in line for line in printed(rt))


def test_a_failing_variant_leaves_alias_and_serving_alone_and_marks_the_version_failed(setup):
    store, cluster, world, _, rt = setup
    assert _promote(setup, version="v1") == 0
    cluster.outcome["neuron"] = "failed"
    assert _promote(setup, version="v2") == 1
    assert store.json(ALIAS)["version"] == "v1"                          # alias unchanged
    assert store.json("models/mistral-7b/v2/neuron/_FAILED")["reason"].startswith("job convert-mistral-7b-v2-neuron failed")
    assert "model.bin" in {k.rsplit("/", 1)[1] for k in store.versions if k.startswith("models/mistral-7b/v2/neuron/")}
    assert store.json("models/mistral-7b/v2/_FAILED")["variants"].keys() == {"neuron"}
    assert [c for c in world.calls if c[0] in ("set_config", "up")] == [
        ("set_config", "serving-demo", VERSION_PATH, "v1"), ("up", "serving-demo")]  # only the first promotion
    assert _served(world) == "v1"
    assert "promotion failed: mistral-7b@production stays at v1; serving unchanged" in "\n".join(printed(rt))


def test_a_report_that_does_not_match_its_files_fails_the_variant(setup):
    store, cluster, world, _, _ = setup
    cluster.outcome["cuda"] = "bad-report"
    assert _promote(setup) == 1
    assert "cuda/model.bin is 12 bytes, the report says 13" in store.json("models/mistral-7b/v2/cuda/_FAILED")["reason"]
    assert store.get(ALIAS) is None and not [c for c in world.calls if c[0] == "set_config"]


def test_dry_run_prints_the_plan_and_touches_nothing(setup):
    store, cluster, world, _, rt = setup
    assert _promote(setup, dry_run=True) == 0
    assert store.writes == [] and cluster.calls == []
    assert not [c for c in world.calls if c[0] in ("set_config", "up")]
    text = "\n".join(printed(rt))
    assert "job models/convert-mistral-7b-v2-neuron: neuron on inf2 (aws.amazon.com/neuron: 1)" in text
    assert f"serving: {VERSION_PATH} 2025-05-20 -> v2 in stack serving-demo, then pulumi up" in text


@pytest.mark.parametrize("prepare, message", [
    (lambda store: seed_run(store.put, RUN_ID, "_FAILED"), "--run-id: run llama-ft-007 failed (exit code 3)"),
    (lambda store: store.put("models/mistral-7b/v2/cuda/manifest.json", b"{}"), "--version: models/mistral-7b/v2/ already exists"),
])
def test_refusals_write_and_start_nothing(setup, prepare, message):
    store, cluster, world, _, _ = setup
    prepare(store)
    store.writes.clear()
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _promote(setup)
    assert store.writes == [] and cluster.calls == [] and not [c for c in world.calls if c[0] == "set_config"]


def test_the_served_variant_must_be_promoted(setup):
    with pytest.raises(InputError, match="--variants: stack serving-demo serves the cuda artefact of mistral-7b; include cuda"):
        _promote(setup, variants=("neuron",))


def test_rollback_restores_the_previous_alias_and_serving_config(setup):
    store, cluster, world, stacks, rt = setup
    assert _promote(setup, version="v1") == 0 and _promote(setup, version="v2") == 0
    assert rollback(Rollback("mistral-7b"), stacks, lambda b, r: store, rt) == 0
    assert store.json(ALIAS)["version"] == "v1" and store.json(ALIAS)["previous"] == []
    assert _served(world) == "v1"
    assert [c[3] for c in world.calls if c[0] == "set_config"] == ["v1", "v2", "v1"]
    assert [c[0] for c in world.calls][-2:] == ["set_config", "up"]
    assert len(store.versions[ALIAS]) == 3  # every move is a new version; none deleted


def test_rollback_without_an_earlier_version_is_refused(setup):
    store, _, world, stacks, rt = setup
    assert _promote(setup, version="v1") == 0
    with pytest.raises(InputError, match="--alias: mistral-7b@production has no earlier version than v1"):
        rollback(Rollback("mistral-7b"), stacks, lambda b, r: store, rt)


def test_a_failed_up_says_how_to_finish_or_undo(setup):
    store, _, world, _, rt = setup
    world.up_failure = "error: update failed"
    assert _promote(setup) == 1
    assert store.json(ALIAS)["version"] == "v2"
    assert "undo with `python -m infra rollback --model mistral-7b --alias production --stack serving-demo`" in printed(rt)[-1]


def test_a_model_nobody_serves_moves_only_the_alias(setup):
    store, cluster, world, stacks, rt = setup
    assert promote(Promotion(RUN_ID, "other-model", "v1", ("cuda",)), stacks, lambda b, r: store,
                   lambda s: cluster, rt) == 0
    assert store.json("models/other-model/aliases/production.json")["version"] == "v1"
    assert not [c for c in world.calls if c[0] == "set_config"]
    assert registry.failed_markers(store, "other-model", "v1") == []


def test_each_job_runs_as_the_converter_down_scoped_to_its_own_prefixes(setup):
    store, cluster, _, _, rt = setup
    assert _promote(setup) == 0
    jobs = {j["metadata"]["labels"]["app.kubernetes.io/component"]: j for j in cluster.applied}
    assert set(jobs) == {"cuda", "neuron"} and all(j["kind"] == "Job" for j in cluster.applied)
    for variant, job in jobs.items():
        assert job["spec"]["template"]["spec"]["serviceAccountName"] == "model-converter"
        options = dict(zip(*[iter(credential_process_argv(job)[7:])] * 2))
        assert options["--role-arn"] == CONVERTER_ROLE_ARN
        policy = access.session_policy(f"arn:aws:s3:::{BUCKET}", KEY_ARN, RUN_ID, "mistral-7b", "v2", variant)
        assert json.loads(options["--policy"]) == policy
    assert any(f"jobs run as models/model-converter ({CONVERTER_ROLE_ARN})" in line for line in printed(rt))


def test_a_serving_stack_without_the_converter_role_is_refused_before_anything_starts(setup):
    store, cluster, world, stacks, rt = setup
    del world.stacks["serving-demo"].outputs["converterRoleArn"]
    with pytest.raises(InputError, match=r"--stack: stack serving-demo has no converterRoleArn output \(the "
                                         r"conversion Jobs' role\): run `pulumi up -s serving-demo` first"):
        promote(Promotion(RUN_ID, "mistral-7b", "v2", ("cuda",)), stacks, lambda b, r: store, lambda s: cluster, rt)
    assert store.writes == [] and cluster.calls == []
