"""`python -m infra promote/rollback`: exit codes and messages, with the S3 side on the moto server."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from infra.cli import main
from infra.ops.promotion import cli as promotion_cli
from infra.ops.promotion.s3 import S3Store
from infra.ops.runtime import Runtime
from tests.infra.ops.lifecycle.recording import FakeClock, RecordingStacks
from tests.infra.ops.promotion.standins import BUCKET, RUN_ID, Cluster, MemoryStore, promotion_world, seed_run


@pytest.fixture
def wired(bucket, aws, monkeypatch):
    world = promotion_world()
    monkeypatch.setattr(promotion_cli, "_stacks", lambda: RecordingStacks(world))
    monkeypatch.setattr(promotion_cli, "_store", lambda b, r: S3Store(b, session=aws.session))
    monkeypatch.setattr(promotion_cli, "_jobs", lambda stacks, stack, directory: pytest.fail("no job may start"))
    return world


@pytest.fixture(autouse=True)
def fake_clock(monkeypatch) -> FakeClock:
    """The CLI's runtime on a clock that moves only when the command waits: no test sleeps in real time."""
    clock = FakeClock()
    monkeypatch.setattr(
        promotion_cli, "terminal_runtime", lambda: Runtime(now=clock.now, sleep=clock.sleep, stream=sys.stdout)
    )
    return clock


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["promote", "--model", "mistral-7b", "--stack", "serving-demo", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_promoting_a_failed_run_exits_2(wired, aws, capsys):
    seed_run(lambda key, body: aws.s3.put_object(Bucket=BUCKET, Key=key, Body=body), "run-bad", "_FAILED")
    code, _, err = _run(capsys, "--run-id", "run-bad", "--version", "v2")
    assert code == 2
    assert err == (
        "error: --run-id: run run-bad failed (exit code 3): runs/run-bad/_FAILED is in the registry; "
        "only a run with _SUCCESS can be promoted\n"
    )


def test_promoting_onto_an_existing_version_exits_2(wired, aws, capsys):
    aws.s3.put_object(Bucket=BUCKET, Key="models/mistral-7b/v2/cuda/manifest.json", Body=b"{}")
    code, _, err = _run(capsys, "--run-id", RUN_ID, "--version", "v2")
    assert code == 2
    assert err == (
        "error: --version: models/mistral-7b/v2/ already exists (1 objects): the version is already being "
        "promoted or promoted; versions are immutable: promote to a new version\n"
    )


def test_dry_run_prints_the_plan_and_writes_nothing(wired, aws, capsys):
    before = aws.s3.list_object_versions(Bucket=BUCKET)["Versions"]
    code, out, _ = _run(capsys, "--run-id", RUN_ID, "--version", "v2", "--dry-run")
    assert code == 0 and "dry run: nothing was started or written" in out
    # The demo's mistral-7b follows the alias on g5: its Job is built and checked for that server.
    assert "(nvidia.com/gpu: 1, cpu 2, memory" in out and "image docker.io/vllm/vllm-openai:v0.33.0" in out
    assert (
        "built and load-checked for the server's engine: tensor_parallel_size=1, max_num_seqs=256, "
        "max_model_len=4096, dtype=bfloat16" in out
    )
    assert aws.s3.list_object_versions(Bucket=BUCKET)["Versions"] == before
    assert not [c for c in wired.calls if c[0] in ("set_config", "up")]


def test_without_variants_it_builds_what_the_stacks_entries_of_the_model_serve(wired, aws, capsys):
    code, out, _ = _run(capsys, "--run-id", RUN_ID, "--version", "v2", "--dry-run")
    assert code == 0
    # serving-demo serves mistral-7b from g5 only: nothing is compiled for inf2, which never serves it.
    assert "job models/convert-mistral-7b-v2-cuda: cuda on g5" in out and "-neuron" not in out


def test_without_variants_a_model_the_stack_does_not_serve_needs_them(wired, aws, capsys):
    code = main(["promote", "--model", "llama-3-70b", "-s", "serving-demo", "--run-id", RUN_ID, "--version", "v2"])
    assert code == 2
    assert capsys.readouterr().err == (
        "error: --variants: stack serving-demo has no entry of llama-3-70b to build for: name the variants (from "
        "neuron, cuda, cuda-fp8, cuda-int4, cuda-int8, neuron-int8)\n"
    )


def test_bad_flags_exit_2_one_line_each(capsys):
    code = main(
        [
            "promote",
            "--run-id",
            "r",
            "--model",
            "m",
            "--version",
            "7",
            "--variants",
            "neuron,rocm",
            "--stack",
            "training-demo",
        ]
    )
    _, err = capsys.readouterr()
    assert code == 2
    assert err.splitlines() == [
        "error: --version: '7' would be stored as a number or boolean in the stack config; use e.g. v7 or a "
        "date like 2026-03-01",
        "error: --variants: comma-separated, from neuron, cuda, cuda-fp8, cuda-int4, cuda-int8, neuron-int8 "
        "(not 'rocm')",
    ]


def test_cuda_int4_without_calibration_data_exits_2(capsys):
    """Its AWQ search reads calibration data from the registry: the flag is required before anything is read."""
    argv = ["promote", "--run-id", "r", "--model", "m", "--version", "v1", "--variants", "cuda,cuda-int4", "-s", "x"]
    code = main([*argv, "--eval-data", "datasets/evals/facts/"])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.splitlines() == [
        "error: --calibration-data: required for cuda-int4: the quantiser's calibration samples, a prefix "
        "datasets/calibration/<name>/ of the registry",
    ]


def test_a_training_stack_is_refused(capsys):
    assert main(["rollback", "--model", "m", "--stack", "training-demo"]) == 2
    assert capsys.readouterr().err == (
        "error: --stack: 'training-demo' is a training stack; promotion takes a serving stack\n"
    )


@pytest.mark.parametrize(
    "verb", [["promote", "--run-id", RUN_ID, "--model", "m", "--version", "v2"], ["rollback", "--model", "m"]]
)
def test_the_serving_stack_must_be_named(capsys, verb):
    with pytest.raises(SystemExit) as exit_:
        main(verb)
    assert exit_.value.code == 2
    assert "the following arguments are required: --stack/-s" in capsys.readouterr().err


def test_an_oversized_checkpoint_is_refused_at_plan_time_even_in_a_dry_run(monkeypatch, capsys):
    store = MemoryStore()
    seed_run(store.put, RUN_ID)
    for key in [k for k in store.versions if k.startswith(f"checkpoints/{RUN_ID}/step-1000/")]:
        store.sizes[key] = 70 * 10**9  # two files: a 140 GB (130.4 GiB) checkpoint, a 70B model in bf16
    monkeypatch.setattr(promotion_cli, "_stacks", lambda: RecordingStacks(promotion_world()))
    monkeypatch.setattr(promotion_cli, "_store", lambda b, r: store)
    code, out, err = _run(capsys, "--run-id", RUN_ID, "--version", "v2", "--variants", "cuda,neuron", "--dry-run")
    assert code == 2 and out == "" and store.writes[-1].startswith("runs/")  # nothing written
    assert err.splitlines() == [
        "error: mlinfra:serving.nodePools.g5: variant cuda needs 1 accelerator, 2 CPU, 167 GiB memory and 271 "
        "GiB disk to convert a 130.4 GiB checkpoint; no instance type of node pool g5 (g5.xlarge, g5.2xlarge; "
        "diskGib 200, 140 GiB usable) holds it: g5.12xlarge would (add it to instanceTypes); diskGib 346 would "
        "hold the work volume",
        "error: mlinfra:serving.nodePools.inf2: variant neuron needs 1 accelerator, 4 CPU, 269 GiB memory and "
        "336 GiB disk to convert a 130.4 GiB checkpoint; no instance type of node pool inf2 (inf2.xlarge, "
        "inf2.8xlarge; diskGib 200, 140 GiB usable) holds it: inf2.24xlarge would (add it to instanceTypes); "
        "diskGib 418 would hold the work volume",
        # The server that follows the alias could not hold these weights either: said before anything runs.
        "error: mlinfra:serving.models[1].memoryGib: a replica of mistral-7b loading 130.4 GiB of weights on g5 "
        "needs about 39 GiB of memory; memoryGib is 10: set memoryGib to 39",
        "error: mlinfra:serving.nodePools.g5.instanceTypes: a replica of mistral-7b (1 accelerator, 2 CPU, 39 GiB "
        "memory) fits no node of g5.xlarge, g5.2xlarge: add g5.4xlarge",
    ]


def test_a_promotion_builds_the_stacks_once_and_removes_its_kubeconfig(bucket, aws, monkeypatch, capsys, tmp_path):
    world = promotion_world()
    world.stacks["serving-demo"].outputs["kubeconfig"] = {"apiVersion": "v1", "kind": "Config"}
    built, seen = [], {}
    monkeypatch.setattr(promotion_cli, "_stacks", lambda: built.append(1) or RecordingStacks(world))
    store = S3Store(BUCKET, session=aws.session)
    monkeypatch.setattr(promotion_cli, "_store", lambda b, r: store)
    real_jobs = promotion_cli._jobs

    def jobs(stacks, stack, directory):
        kubectl = real_jobs(stacks, stack, directory)  # writes the kubeconfig
        path = os.path.join(directory, "kubeconfig.yaml")
        seen.update(
            path=path,
            mode=stat.S_IMODE(os.stat(path).st_mode),
            args=kubectl._base,
            config=json.loads(open(path, encoding="utf-8").read()),
        )
        return Cluster(store)

    monkeypatch.setattr(promotion_cli, "_jobs", jobs)
    code, out, _ = _run(capsys, "--run-id", RUN_ID, "--version", "v2")
    assert code == 0, out
    assert built == [1]
    assert seen["mode"] == 0o600 and seen["config"] == {"apiVersion": "v1", "kind": "Config"}
    assert seen["args"] == ["kubectl", "--kubeconfig", seen["path"]]
    assert not os.path.exists(seen["path"]) and not os.path.exists(os.path.dirname(seen["path"]))
    assert out.splitlines()[-1].startswith("stacks/Pulumi.serving-demo.yaml was rewritten: commit it")


def _versions(aws) -> list[tuple[str, str]]:
    return sorted((v["Key"], v["VersionId"]) for v in aws.s3.list_object_versions(Bucket=BUCKET).get("Versions", []))


def test_a_second_promotion_of_a_version_being_promoted_is_refused_and_touches_nothing(
    bucket, aws, monkeypatch, capsys
):
    world = promotion_world()
    monkeypatch.setattr(promotion_cli, "_stacks", lambda: RecordingStacks(world))
    store = S3Store(BUCKET, session=aws.session)
    monkeypatch.setattr(promotion_cli, "_store", lambda b, r: store)
    first, second = Cluster(store), Cluster(store)
    clusters = iter([first, second])
    monkeypatch.setattr(promotion_cli, "_jobs", lambda stacks, stack, directory: next(clusters))
    during: dict = {}
    state = first.state

    def state_then_second_promotion(namespace, name):
        if not during:  # while the first promotion's Jobs run, someone promotes the same version
            before = _versions(aws)
            during["code"] = main(
                [
                    "promote",
                    "--model",
                    "mistral-7b",
                    "--stack",
                    "serving-demo",
                    "--run-id",
                    RUN_ID,
                    "--version",
                    "v2",
                    "--variants",
                    "cuda",
                ]
            )
            during["err"] = capsys.readouterr().err
            during["unchanged"] = _versions(aws) == before
        return state(namespace, name)

    first.state = state_then_second_promotion
    code, out, _ = _run(capsys, "--run-id", RUN_ID, "--version", "v2", "--variants", "neuron,cuda")
    assert during == {
        "code": 2,
        "unchanged": True,
        "err": (
            "error: --version: models/mistral-7b/v2/ already exists (1 objects): the version is already being "
            "promoted or "
            "promoted; versions are immutable: promote to a new version\n"
        ),
    }
    assert second.calls == []  # it never reached the cluster
    assert code == 0 and json.loads(store.get("models/mistral-7b/aliases/production.json"))["version"] == "v2"
    assert json.loads(store.get("models/mistral-7b/v2/_PROMOTION"))["variants"] == ["neuron", "cuda"]  # the first's


def test_two_promotions_racing_for_a_version_only_one_claims_it(bucket, aws, monkeypatch, capsys):
    """Both find the version free; the other one claims it between our check and our claim."""
    world = promotion_world()
    monkeypatch.setattr(promotion_cli, "_stacks", lambda: RecordingStacks(world))
    claim = {"run": "other-run", "variants": ["cuda"], "started_at": "2026-03-01T09:59:59Z"}

    class Racing(S3Store):
        def put_new(self, key, body):
            if key.endswith("/_PROMOTION"):  # the other promotion's claim lands first (its own If-None-Match write)
                S3Store(BUCKET, session=aws.session).put_new(key, json.dumps(claim).encode())
            super().put_new(key, body)

    store = Racing(BUCKET, session=aws.session)
    monkeypatch.setattr(promotion_cli, "_store", lambda b, r: store)
    monkeypatch.setattr(promotion_cli, "_jobs", lambda stacks, stack, directory: pytest.fail("no job may start"))
    code, _, err = _run(capsys, "--run-id", RUN_ID, "--version", "v2")
    assert code == 2
    assert err == (
        "error: --version: models/mistral-7b/v2/_PROMOTION already exists: the version is already being "
        "promoted or promoted; versions are immutable: promote to a new version\n"
    )
    assert [k for k, _ in _versions(aws) if k.startswith("models/")] == ["models/mistral-7b/v2/_PROMOTION"]
    assert json.loads(store.get("models/mistral-7b/v2/_PROMOTION")) == claim  # the winner's claim, untouched
