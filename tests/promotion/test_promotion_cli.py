"""`python -m infra promote/rollback`: exit codes and messages, with the S3 side on the moto server."""
from __future__ import annotations

import pytest

from infra.cli import main
from infra.promotion import cli as promotion_cli
from infra.promotion.s3 import S3Store
from tests.lifecycle.recording import RecordingStacks
from tests.promotion.standins import BUCKET, RUN_ID, promotion_world, seed_run


@pytest.fixture
def wired(bucket, aws, monkeypatch):
    world = promotion_world()
    monkeypatch.setattr(promotion_cli, "_stacks", lambda: RecordingStacks(world))
    monkeypatch.setattr(promotion_cli, "_store", lambda b, r: S3Store(b, session=aws.session))
    monkeypatch.setattr(promotion_cli, "_jobs", lambda stack: pytest.fail("no job may start"))
    return world


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["promote", "--model", "mistral-7b", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_promoting_a_failed_run_exits_2(wired, aws, capsys):
    seed_run(lambda key, body: aws.s3.put_object(Bucket=BUCKET, Key=key, Body=body), "run-bad", "_FAILED")
    code, _, err = _run(capsys, "--run-id", "run-bad", "--version", "v2")
    assert code == 2
    assert err == ("error: --run-id: run run-bad failed (exit code 3): runs/run-bad/_FAILED is in the registry; "
                   "only a run with _SUCCESS can be promoted\n")


def test_promoting_onto_an_existing_version_exits_2(wired, aws, capsys):
    aws.s3.put_object(Bucket=BUCKET, Key="models/mistral-7b/v2/cuda/manifest.json", Body=b"{}")
    code, _, err = _run(capsys, "--run-id", RUN_ID, "--version", "v2")
    assert code == 2
    assert err.startswith("error: --version: models/mistral-7b/v2/ already exists (1 objects)")


def test_dry_run_prints_the_plan_and_writes_nothing(wired, aws, capsys):
    before = aws.s3.list_object_versions(Bucket=BUCKET)["Versions"]
    code, out, _ = _run(capsys, "--run-id", RUN_ID, "--version", "v2", "--dry-run")
    assert code == 0 and "dry run: nothing was started or written" in out
    assert aws.s3.list_object_versions(Bucket=BUCKET)["Versions"] == before
    assert not [c for c in wired.calls if c[0] in ("set_config", "up")]


def test_bad_flags_exit_2_one_line_each(capsys):
    code = main(["promote", "--run-id", "r", "--model", "m", "--version", "7", "--variants", "neuron,rocm",
                 "--stack", "training-demo"])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.splitlines() == [
        "error: --version: '7' would be stored as a number or boolean in the stack config; use e.g. v7 or a date like 2026-03-01",
        "error: --variants: comma-separated, from neuron, cuda, tensorrt (not 'rocm')"]


def test_a_training_stack_is_refused(capsys):
    assert main(["rollback", "--model", "m", "--stack", "training-demo"]) == 2
    assert capsys.readouterr().err == ("error: --stack: 'training-demo' is a training stack; promotion takes a "
                                       "serving stack\n")
