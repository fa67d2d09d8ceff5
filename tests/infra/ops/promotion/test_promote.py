"""Promote and rollback against recording stand-ins: in-memory registry, scripted cluster, recorded stacks."""

from __future__ import annotations

import json

import pytest

from infra.core.errors import InputError
from infra.ops.promotion import registry
from infra.ops.promotion.promote import promote, rollback
from infra.ops.promotion.request import Promotion, Rollback
from infra.serving.aws import converter_access as access
from tests.infra.ops.lifecycle.recording import FakeClock, RecordingStacks, printed, runtime
from tests.infra.ops.promotion.standins import (
    BUCKET,
    CONVERTER_ROLE_ARN,
    KEY_ARN,
    NOW,
    RUN_ID,
    Cluster,
    MemoryStore,
    credential_process_argv,
    promotion_world,
    seed_run,
)

VERSION_PATH = "mlinfra:serving.models[1].version"  # mistral-7b follows `production` in serving-demo
ALIAS = "models/mistral-7b/aliases/production.json"
HINT = (
    "stacks/Pulumi.serving-demo.yaml was rewritten: commit it (git commit stacks/Pulumi.serving-demo.yaml), or the "
    "next `pulumi up` from a checkout puts the previous version back"
)


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
    code = promote(
        Promotion(run_id, "mistral-7b", version, variants),
        stacks,
        lambda bucket, region: seen.append((bucket, region)) or store,
        lambda stack: cluster,
        rt,
        dry_run,
    )
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
        ("set_config", "serving-demo", VERSION_PATH),
        ("up", "serving-demo"),
    ]
    assert _served(world) == "v2"
    assert [k for k in store.versions if k.endswith("_FAILED")] == []
    assert any(line.startswith("converting | ") and "cuda running" in line for line in printed(rt))


def test_a_failing_variant_leaves_alias_and_serving_alone_and_marks_the_version_failed(setup):
    store, cluster, world, _, rt = setup
    assert _promote(setup, version="v1") == 0
    cluster.outcome["neuron"] = "failed"
    assert _promote(setup, version="v2") == 1
    assert store.json(ALIAS)["version"] == "v1"  # alias unchanged
    assert store.json("models/mistral-7b/v2/neuron/_FAILED")["reason"].startswith(
        "job convert-mistral-7b-v2-neuron failed"
    )
    assert "model.bin" in {k.rsplit("/", 1)[1] for k in store.versions if k.startswith("models/mistral-7b/v2/neuron/")}
    assert store.json("models/mistral-7b/v2/_FAILED")["variants"].keys() == {"neuron"}
    assert [c for c in world.calls if c[0] in ("set_config", "up")] == [
        ("set_config", "serving-demo", VERSION_PATH, "v1"),
        ("up", "serving-demo"),
    ]  # only the first promotion
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
    assert (
        "job models/convert-mistral-7b-v2-neuron: neuron on inf2 (aws.amazon.com/neuron: 1, cpu 4, memory 9Gi, "
        "disk 11Gi)"
    ) in text
    assert "first: claim models/mistral-7b/v2/_PROMOTION (only if absent)" in text
    assert (
        f"serving: {VERSION_PATH} 2025-05-20 -> v2 in stack serving-demo (rewrites stacks/Pulumi.serving-demo.yaml), "
        "then pulumi up"
    ) in text


@pytest.mark.parametrize(
    "prepare, message",
    [
        (lambda store: seed_run(store.put, RUN_ID, "_FAILED"), "--run-id: run llama-ft-007 failed (exit code 3)"),
        (
            lambda store: store.put("models/mistral-7b/v2/cuda/manifest.json", b"{}"),
            "--version: models/mistral-7b/v2/ already exists",
        ),
    ],
)
def test_refusals_write_and_start_nothing(setup, prepare, message):
    store, cluster, world, _, _ = setup
    prepare(store)
    store.writes.clear()
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _promote(setup)
    assert store.writes == [] and cluster.calls == [] and not [c for c in world.calls if c[0] == "set_config"]


def test_the_served_variant_must_be_promoted(setup):
    with pytest.raises(
        InputError, match="--variants: stack serving-demo serves the cuda artefact of mistral-7b; include cuda"
    ):
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
    assert (
        "undo with `python -m infra rollback --model mistral-7b --alias production --stack serving-demo`"
        in printed(rt)[-2]
    )
    assert printed(rt)[-1] == HINT


def test_a_model_nobody_serves_moves_only_the_alias(setup):
    store, cluster, world, stacks, rt = setup
    assert (
        promote(Promotion(RUN_ID, "other-model", "v1", ("cuda",)), stacks, lambda b, r: store, lambda s: cluster, rt)
        == 0
    )
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
        options = dict(zip(*[iter(credential_process_argv(job)[7:])] * 2, strict=True))
        assert options["--role-arn"] == CONVERTER_ROLE_ARN
        policy = access.session_policy(f"arn:aws:s3:::{BUCKET}", KEY_ARN, RUN_ID, "mistral-7b", "v2", variant)
        assert json.loads(options["--policy"]) == policy
    assert any(f"jobs run as models/model-converter ({CONVERTER_ROLE_ARN})" in line for line in printed(rt))


def test_a_serving_stack_without_the_converter_role_is_refused_before_anything_starts(setup):
    store, cluster, world, stacks, rt = setup
    del world.stacks["serving-demo"].outputs["converterRoleArn"]
    with pytest.raises(
        InputError,
        match=r"--stack: stack serving-demo has no converterRoleArn output \(the "
        r"conversion Jobs' role\): run `pulumi up -s serving-demo` first",
    ):
        promote(Promotion(RUN_ID, "mistral-7b", "v2", ("cuda",)), stacks, lambda b, r: store, lambda s: cluster, rt)
    assert store.writes == [] and cluster.calls == []


def _jobs_named(cluster, verb: str) -> list[str]:
    return [c[2] for c in cluster.calls if c[0] == verb]


def test_jobs_are_created_never_applied_and_the_version_is_claimed_first(setup):
    store, cluster, _, _, rt = setup
    assert _promote(setup) == 0
    assert [c[0] for c in cluster.calls][:2] == ["create", "create"]
    assert store.writes[0] == "models/mistral-7b/v2/_PROMOTION"  # before any Job (and any other write)
    claim = store.json("models/mistral-7b/v2/_PROMOTION")
    assert claim == {
        "run": RUN_ID,
        "variants": ["cuda", "neuron"],
        "started_at": NOW,
        "checkpoint": f"s3://{BUCKET}/checkpoints/{RUN_ID}/step-1000/",
    }
    assert printed(rt)[-1] == HINT


def test_a_failing_variant_stops_the_others_and_marks_every_variant(setup):
    store, cluster, world, _, rt = setup
    cluster.outcome.update(neuron="failed", cuda="running")
    assert _promote(setup) == 1
    assert _jobs_named(cluster, "delete") == ["convert-mistral-7b-v2-cuda"]  # the failed one keeps its logs
    assert store.json("models/mistral-7b/v2/cuda/_FAILED")["reason"] == "stopped: variant neuron failed"
    assert store.json("models/mistral-7b/v2/neuron/_FAILED")["reason"].startswith(
        "job convert-mistral-7b-v2-neuron failed"
    )
    assert store.get(ALIAS) is None and not [c for c in world.calls if c[0] == "set_config"]
    assert "deleted job models/convert-mistral-7b-v2-cuda (cuda was running)" in printed(rt)


def test_a_succeeded_variant_of_a_failed_version_is_marked_too(setup):
    store, cluster, _, _, _ = setup
    cluster.outcome["neuron"] = "failed"
    cluster.polls = 1
    assert _promote(setup) == 1
    assert store.get("models/mistral-7b/v2/cuda/manifest.json") is not None
    assert store.json("models/mistral-7b/v2/cuda/_FAILED")["reason"] == "version v2 failed: neuron failed"
    assert registry.servable_problems(store, "mistral-7b", "v2", ["cuda"]) == [
        "models/mistral-7b/v2/_FAILED is in the registry",
        "models/mistral-7b/v2/cuda/_FAILED is in the registry",
        "models/mistral-7b/v2/neuron/_FAILED is in the registry",
    ]


def test_ctrl_c_deletes_the_started_jobs_and_marks_the_version(setup):
    store, cluster, world, _, rt = setup
    cluster.interrupt_after = 1  # Ctrl-C at the second state check
    with pytest.raises(KeyboardInterrupt):
        _promote(setup)
    assert sorted(_jobs_named(cluster, "delete")) == ["convert-mistral-7b-v2-cuda", "convert-mistral-7b-v2-neuron"]
    assert cluster.existing == set()
    assert {store.json(f"models/mistral-7b/v2/{v}/_FAILED")["reason"] for v in ("cuda", "neuron")} == {
        "promotion stopped (interrupted)"
    }
    assert store.get(ALIAS) is None and not [c for c in world.calls if c[0] == "set_config"]
    assert "interrupted: stopping the promotion" in printed(rt)
    # Deleting Jobs deletes nothing in the registry: every object written is still there.
    assert all(store.get(k) is not None for k in store.writes)


def test_a_job_that_cannot_be_created_stops_the_ones_already_created_and_leaves_others_alone(setup):
    store, cluster, _, _, _ = setup
    cluster.existing.add("convert-mistral-7b-v2-neuron")  # someone else's Job of that name
    with pytest.raises(Exception, match='jobs.batch "convert-mistral-7b-v2-neuron" already exists'):
        _promote(setup)
    assert _jobs_named(cluster, "delete") == ["convert-mistral-7b-v2-cuda"]
    assert "convert-mistral-7b-v2-neuron" in cluster.existing  # never adopted, changed nor deleted
    assert store.get("models/mistral-7b/v2/_FAILED") is not None


def test_an_unschedulable_pod_is_shown_then_fails_the_promotion_after_30_minutes(setup):
    store, cluster, _, _, rt = setup
    cluster.outcome["cuda"] = "unschedulable"
    assert _promote(setup) == 1
    lines = printed(rt)
    assert any(
        line.startswith(
            "converting | 0s | cuda unschedulable (0/3 nodes are available: 3 Insufficient "
            "nvidia.com/gpu; cluster autoscaler: pod didn't trigger scale-up"
        )
        for line in lines
    )
    reason = store.json("models/mistral-7b/v2/cuda/_FAILED")["reason"]
    assert reason.startswith(
        "job convert-mistral-7b-v2-cuda failed: its pod could not be scheduled for 30m 00s, and "
        "the cluster autoscaler added no node for it: 0/3 nodes are available"
    )
    assert "convert-mistral-7b-v2-cuda" in _jobs_named(cluster, "delete")  # still pending in the cluster: deleted


def test_a_failed_marker_written_before_the_alias_moves_stops_it(setup):
    store, cluster, world, _, _ = setup
    put = store.put

    def put_then_fail(key, body):
        put(key, body)
        if key.endswith("neuron/manifest.json"):
            put("models/mistral-7b/v2/neuron/_FAILED", b'{"reason": "marked by hand"}')

    store.put = put_then_fail
    with pytest.raises(InputError) as error:
        _promote(setup)
    assert str(error.value) == (
        "--version: mistral-7b version v2 cannot be served: models/mistral-7b/v2/neuron/_FAILED "
        "is in the registry; the alias was not moved"
    )
    assert store.get(ALIAS) is None and not [c for c in world.calls if c[0] == "set_config"]


def test_the_alias_moves_over_a_concurrent_move_by_reading_it_again(setup):
    store, _, _, _, rt = setup
    assert _promote(setup, version="v1") == 0
    raced = []

    def other_writer(key):
        if key == ALIAS and not raced:  # another promotion moves the alias between our read and our write
            raced.append(key)
            store.put(ALIAS, json.dumps({"version": "v1b", "previous": ["v1"], "history": []}).encode())

    store.before_write = other_writer
    assert _promote(setup, version="v2") == 0
    assert store.refused == [ALIAS]  # the stale write was refused (If-Match) ...
    assert store.json(ALIAS)["version"] == "v2" and store.json(ALIAS)["previous"] == ["v1", "v1b"]  # ... then redone


def test_an_alias_that_keeps_changing_is_not_moved(setup):
    store, _, world, _, rt = setup
    store.before_write = lambda key: key == ALIAS and store.put(ALIAS, b'{"version": "other"}')
    store.put(ALIAS, b'{"version": "v0"}')
    assert _promote(setup) == 1
    assert store.json(ALIAS) == {"version": "other"} and len(store.refused) == registry.ALIAS_ATTEMPTS
    assert printed(rt)[-1] == (
        "error: models/mistral-7b/aliases/production.json changed while it was being moved, 5 "
        "times in a row; it was not moved; version v2 is complete but mistral-7b@production did "
        "not move; serving unchanged"
    )
    assert not [c for c in world.calls if c[0] == "set_config"]


def test_rollback_refuses_a_version_that_cannot_be_served(setup):
    store, _, world, stacks, rt = setup
    assert _promote(setup, version="v1") == 0 and _promote(setup, version="v2") == 0
    store.put("models/mistral-7b/v1/cuda/_FAILED", b"{}")
    with pytest.raises(InputError) as error:
        rollback(Rollback("mistral-7b"), stacks, lambda b, r: store, rt)
    assert str(error.value) == (
        "--alias: mistral-7b version v1 cannot be served: models/mistral-7b/v1/cuda/_FAILED is "
        "in the registry; the alias was not moved"
    )
    assert store.json(ALIAS)["version"] == "v2" and _served(world) == "v2"


def test_rollback_refuses_a_version_without_the_served_manifest(setup):
    store, _, _, stacks, rt = setup
    store.put(ALIAS, json.dumps({"version": "v2", "previous": ["v0"], "history": []}).encode())
    with pytest.raises(
        InputError,
        match=r"--alias: mistral-7b version v0 cannot be served: "
        r"models/mistral-7b/v0/cuda/manifest.json is missing",
    ):
        rollback(Rollback("mistral-7b"), stacks, lambda b, r: store, rt)


def test_rollback_prints_the_commit_hint(setup):
    store, _, _, stacks, rt = setup
    assert _promote(setup, version="v1") == 0 and _promote(setup, version="v2") == 0
    assert rollback(Rollback("mistral-7b"), stacks, lambda b, r: store, rt) == 0
    assert printed(rt)[-2:] == ["stack serving-demo serves version v1", HINT]


def test_an_explicit_checkpoint_is_promoted(setup):
    store, cluster, _, stacks, rt = setup
    assert (
        promote(
            Promotion(RUN_ID, "mistral-7b", "v2", ("cuda",), checkpoint=f"checkpoints/{RUN_ID}/step-900"),
            stacks,
            lambda b, r: store,
            lambda s: cluster,
            rt,
        )
        == 0
    )
    assert cluster.applied[0]["metadata"]["annotations"]["mlinfra.io/checkpoint"] == (
        f"s3://{BUCKET}/checkpoints/{RUN_ID}/step-900/"
    )
