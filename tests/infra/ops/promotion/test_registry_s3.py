"""The registry's promotion rules against the moto server's S3: markers, immutability, manifests, aliases."""

from __future__ import annotations

import hashlib
import json

import pytest

from infra.core.errors import InputError
from infra.ops.promotion import registry
from infra.ops.promotion.ports import Conflict
from infra.ops.promotion.s3 import S3Store
from tests.infra.ops.promotion.standins import BUCKET, NOW, RUN_ID, seed_run


@pytest.fixture
def store(bucket, aws) -> S3Store:
    return S3Store(bucket, session=aws.session)


def _message(error: pytest.ExceptionInfo) -> str:
    [problem] = error.value.problems
    return str(problem)


def test_a_successful_run_passes_and_its_last_step_is_the_checkpoint(store):
    assert registry.check_run(store, RUN_ID)["exit_code"] == 0
    checkpoint = registry.final_checkpoint(store, RUN_ID)
    assert checkpoint.prefix == f"checkpoints/{RUN_ID}/step-1000/"  # natural order, not step-900
    assert checkpoint.objects == 2


def test_a_failed_run_is_refused(store, aws):
    seed_run(lambda key, body: aws.s3.put_object(Bucket=BUCKET, Key=key, Body=body), "run-bad", "_FAILED")
    with pytest.raises(InputError) as error:
        registry.check_run(store, "run-bad")
    assert _message(error) == (
        "--run-id: run run-bad failed (exit code 3): runs/run-bad/_FAILED is in the "
        "registry; only a run with _SUCCESS can be promoted"
    )


def test_a_run_with_both_markers_is_refused(store, aws):
    aws.s3.put_object(Bucket=BUCKET, Key=f"runs/{RUN_ID}/_FAILED", Body=b"not json")
    with pytest.raises(InputError, match="run llama-ft-007 failed: runs/llama-ft-007/_FAILED"):
        registry.check_run(store, RUN_ID)


def test_an_unfinished_run_is_refused(store):
    with pytest.raises(InputError) as error:
        registry.check_run(store, "run-still-going")
    assert _message(error) == (
        "--run-id: run run-still-going has no runs/run-still-going/_SUCCESS in the "
        "registry: it is unfinished or never ran; only a run with _SUCCESS can be promoted"
    )


def test_a_run_without_checkpoints_is_refused(store):
    with pytest.raises(InputError, match="has nothing under checkpoints/empty-run/"):
        registry.final_checkpoint(store, "empty-run")


def test_an_existing_version_is_immutable(store, aws):
    registry.check_version_free(store, "mistral-7b", "v1")
    aws.s3.put_object(Bucket=BUCKET, Key="models/mistral-7b/v1/cuda/_FAILED", Body=b"{}")
    with pytest.raises(InputError) as error:
        registry.check_version_free(store, "mistral-7b", "v1")
    assert _message(error) == (
        "--version: models/mistral-7b/v1/ already exists (1 objects): the version is already "
        "being promoted or promoted; versions are immutable: promote to a new version"
    )
    registry.check_version_free(store, "mistral-7b", "v10")  # a prefix of another version is not that version


def test_the_manifest_records_source_versions_hardware_and_checksums(store, aws):
    prefix = "models/mistral-7b/v2/cuda/"
    body = b"weights" * 100
    aws.s3.put_object(Bucket=BUCKET, Key=prefix + "model.safetensors", Body=body)
    report = {
        "compilerVersion": "cuda 12.4",
        "runtimeVersion": "0.8.5",
        "node": "ip-1",
        "files": [{"path": "model.safetensors", "size": len(body), "sha256": hashlib.sha256(body).hexdigest()}],
    }
    aws.s3.put_object(Bucket=BUCKET, Key=prefix + "conversion.json", Body=json.dumps(report).encode())
    source = {"runId": RUN_ID, "checkpoint": f"s3://{BUCKET}/checkpoints/{RUN_ID}/step-1000/"}
    facts = {
        "model": "mistral-7b",
        "version": "v2",
        "variant": "cuda",
        "format": "safetensors",
        "precision": "bf16",
        "hardware": {"accelerator": "g5", "resource": "nvidia.com/gpu"},
    }
    key = registry.write_manifest(store, prefix, registry.build_manifest(store, prefix, source, facts))
    manifest = json.loads(aws.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    assert key == prefix + "manifest.json"
    assert manifest["source"] == source and manifest["precision"] == "bf16" and manifest["format"] == "safetensors"
    assert manifest["compilerVersion"] == "cuda 12.4" and manifest["runtimeVersion"] == "0.8.5"
    assert manifest["hardware"] == {"accelerator": "g5", "resource": "nvidia.com/gpu", "node": "ip-1"}
    assert manifest["files"] == [{"path": "model.safetensors", "size": 700, "sha256": hashlib.sha256(body).hexdigest()}]


def test_a_report_that_does_not_match_the_stored_files_is_refused(store, aws):
    prefix = "models/mistral-7b/v3/cuda/"
    aws.s3.put_object(Bucket=BUCKET, Key=prefix + "model.safetensors", Body=b"abc")
    aws.s3.put_object(Bucket=BUCKET, Key=prefix + "stray.bin", Body=b"x")
    files = [{"path": "model.safetensors", "size": 3, "sha256": "0" * 64}]
    aws.s3.put_object(Bucket=BUCKET, Key=prefix + "conversion.json", Body=json.dumps({"files": files}).encode())
    with pytest.raises(
        ValueError, match="models/mistral-7b/v3/cuda/stray.bin is in the registry but not in the report"
    ):
        registry.build_manifest(store, prefix, {}, {"hardware": {}})
    with pytest.raises(ValueError, match="left no models/mistral-7b/v4/cuda/conversion.json"):
        registry.build_manifest(store, "models/mistral-7b/v4/cuda/", {}, {"hardware": {}})


def test_aliases_move_and_roll_back_as_new_object_versions(store, aws):
    assert registry.read_alias(store, "mistral-7b", "production") is None
    registry.move_alias(store, "mistral-7b", "production", "v1", NOW, runId="r1")
    registry.move_alias(store, "mistral-7b", "production", "v2", NOW, runId="r2")
    alias = registry.read_alias(store, "mistral-7b", "production")
    assert (alias.version, alias.previous) == ("v2", ["v1"])
    before, after = registry.roll_back_alias(store, "mistral-7b", "production", NOW)
    assert (before.version, after.version, after.previous) == ("v2", "v1", [])
    assert [h["action"] for h in after.history] == ["promote", "promote", "rollback"]
    key = "models/mistral-7b/aliases/production.json"
    versions = aws.s3.list_object_versions(Bucket=BUCKET, Prefix=key)
    assert len(versions["Versions"]) == 3 and not versions.get("DeleteMarkers")  # nothing deleted
    with pytest.raises(InputError, match="--alias: mistral-7b@production has no earlier version than v1"):
        registry.roll_back_alias(store, "mistral-7b", "production", NOW)


def test_failed_markers_are_found(store):
    registry.mark_failed(store, "models/m/v1/neuron/", "job failed", NOW)
    assert registry.failed_markers(store, "m", "v1") == ["models/m/v1/neuron/_FAILED"]
    assert json.loads(store.get("models/m/v1/neuron/_FAILED"))["reason"] == "job failed"


def _put(aws, *keys: str, body: bytes = b"x") -> None:
    for key in keys:
        aws.s3.put_object(Bucket=BUCKET, Key=key, Body=body)


@pytest.mark.parametrize(
    "keys, chosen",
    [
        (["checkpoint-1000/model.safetensors", "runs/events.out", "final/model.safetensors"], "checkpoint-1000/"),
        (["step-1000/model.safetensors", "tokenizer/tokenizer.json"], "step-1000/"),
        (["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "config.json", "logs/train.log"], ""),
        (["global_step90/mp_rank_00_model_states.pt", "global_step100/mp_rank_00_model_states.pt"], "global_step100/"),
        (["ckpt_7/model.pt", "checkpoint-12/model.pt", "step-9/model.pt"], "checkpoint-12/"),
    ],
    ids=["checkpoint-dirs-and-others", "step-and-tokenizer", "root-weights", "deepspeed", "mixed-names"],
)
def test_the_final_checkpoint_is_the_highest_step_directory_else_the_root(store, aws, keys, chosen):
    _put(aws, *(f"checkpoints/run-x/{k}" for k in keys))
    checkpoint = registry.final_checkpoint(store, "run-x")
    assert checkpoint.prefix == f"checkpoints/run-x/{chosen}"
    assert checkpoint.objects == len([k for k in keys if k.startswith(chosen)])


def test_a_run_without_step_directories_or_root_weights_must_name_its_checkpoint(store, aws):
    _put(aws, "checkpoints/run-x/final/model.safetensors", "checkpoints/run-x/runs/events.out")
    with pytest.raises(InputError) as error:
        registry.final_checkpoint(store, "run-x")
    assert _message(error) == (
        "--checkpoint: checkpoints/run-x/ has no step directory (step-N, checkpoint-N, ckpt-N, global_stepN) and no "
        "weight files (*.safetensors, *.bin, *.pt, *.pth) at its root; name the checkpoint with --checkpoint "
        "checkpoints/run-x/<dir>/"
    )
    assert registry.final_checkpoint(store, "run-x", "checkpoints/run-x/final").prefix == "checkpoints/run-x/final/"


@pytest.mark.parametrize(
    "explicit, message",
    [
        (
            "checkpoints/other-run/step-1/",
            "--checkpoint: 'checkpoints/other-run/step-1/' is not a prefix under "
            "checkpoints/run-x/ (e.g. checkpoints/run-x/step-1000/)",
        ),
        (
            "checkpoints/run-x/../other/",
            "--checkpoint: 'checkpoints/run-x/../other/' is not a prefix under "
            "checkpoints/run-x/ (e.g. checkpoints/run-x/step-1000/)",
        ),
        ("checkpoints/run-x/step-5/", "--checkpoint: nothing under checkpoints/run-x/step-5/ in the registry"),
    ],
)
def test_an_explicit_checkpoint_must_be_under_the_run(store, aws, explicit, message):
    _put(aws, "checkpoints/run-x/step-1/model.safetensors")
    with pytest.raises(InputError) as error:
        registry.final_checkpoint(store, "run-x", explicit)
    assert _message(error) == message


def test_moto_honours_if_none_match_so_a_version_is_claimed_once(store, aws):
    key = registry.claim_version(store, "mistral-7b", "v9", {"run": "r1"})
    with pytest.raises(InputError) as error:
        registry.claim_version(store, "mistral-7b", "v9", {"run": "r2"})
    assert _message(error) == (
        "--version: models/mistral-7b/v9/_PROMOTION already exists: the version is already "
        "being promoted or promoted; versions are immutable: promote to a new version"
    )
    versions = aws.s3.list_object_versions(Bucket=BUCKET, Prefix=key)["Versions"]
    assert len(versions) == 1 and json.loads(store.get(key)) == {"run": "r1"}  # the first claim, untouched


def test_moto_honours_if_match_so_a_stale_alias_write_is_refused(store, aws):
    key = registry.alias_key("mistral-7b", "production")
    registry.move_alias(store, "mistral-7b", "production", "v1", NOW)
    body, etag = store.read(key)
    registry.move_alias(store, "mistral-7b", "production", "v2", NOW)  # another writer
    with pytest.raises(Conflict):
        store.put_if_match(key, body, etag)
    with pytest.raises(Conflict):
        store.put_new(key, body)
    assert registry.read_alias(store, "mistral-7b", "production").version == "v2"
    assert len(aws.s3.list_object_versions(Bucket=BUCKET, Prefix=key)["Versions"]) == 2


def test_a_concurrent_alias_move_is_read_again_and_kept_in_the_history(store, aws):
    key = registry.alias_key("mistral-7b", "production")
    registry.move_alias(store, "mistral-7b", "production", "v1", NOW)
    real_put_if_match, raced = store.put_if_match, []

    def racing(k, body, etag):
        if not raced:  # between our read and our write, another promotion moves the alias
            raced.append(k)
            aws.s3.put_object(Bucket=BUCKET, Key=key, Body=json.dumps({"version": "v1b", "previous": ["v1"]}).encode())
        real_put_if_match(k, body, etag)

    store.put_if_match = racing
    moved = registry.move_alias(store, "mistral-7b", "production", "v2", NOW)
    assert raced and (moved.version, moved.previous) == ("v2", ["v1", "v1b"])
    assert registry.read_alias(store, "mistral-7b", "production").previous == ["v1", "v1b"]


def test_servable_needs_the_manifest_and_no_failed_marker(store, aws):
    _put(aws, "models/m/v1/cuda/manifest.json", "models/m/v1/neuron/manifest.json")
    assert registry.servable_problems(store, "m", "v1", ["cuda"]) == []
    assert registry.servable_problems(store, "m", "v2", ["cuda"]) == ["models/m/v2/cuda/manifest.json is missing"]
    _put(aws, "models/m/v1/neuron/_FAILED")
    assert registry.servable_problems(store, "m", "v1", ["cuda"]) == ["models/m/v1/neuron/_FAILED is in the registry"]
