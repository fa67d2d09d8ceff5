"""Bad input at the edges a red-team pass found reaching exit 1 or 3: each is exit 2 with one line naming the key
or flag (issue 36's list). Through the real CLI, as a user or a pipeline runs it."""

from __future__ import annotations

import json
import os

import pytest

from infra.core.errors import InputError
from infra.core.project import read_yaml
from tests.helpers import run_cli


def run(capsys, *argv: str) -> tuple[int, str]:
    """The CLI in a process of its own, as a pipeline runs it: some of these inputs push the parsers to their
    limits, and a test process that went on to parse Python (CPython 3.11's ast) was seen failing after them."""
    done = run_cli(*argv)
    return done.returncode, done.stderr


@pytest.mark.parametrize("stack", ["", "a" * 300, "../registry", "registry/../x", "two words"])
def test_a_stack_name_pulumi_would_refuse(capsys, stack):
    for verb in (["policy", "--stack", stack], ["preview", "--stack", stack], ["cost", "--stack", stack]):
        code, err = run(capsys, *verb)
        assert code == 2, verb
        assert err.startswith("error: --stack: ") and "is not a stack name" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "value",
    ["NaN", "Infinity", "-Infinity", "1e999", "[" * 5000 + "]" * 5000],
    ids=["nan", "infinity", "minus-infinity", "overflow", "nested-5000"],  # short ids: not the 10,000-char value
)
def test_policy_config_numbers_the_engine_cannot_send(capsys, value):
    code, err = run(
        capsys,
        "policy",
        "--stack",
        "registry",
        "--policy-config",
        f"stack-hourly-cost-under-ceiling.maxHourlyCostUsd={value}",
    )
    assert code == 2
    assert err.startswith("error: --policy-config stack-hourly-cost-under-ceiling.maxHourlyCostUsd: ")


def test_a_reference_to_a_stack_the_offline_preview_cannot_run(capsys):
    code, err = run(capsys, "preview", "--stack", "serving-demo", "-c", "mlinfra:registryStack=a/b/c")
    assert code == 2
    assert err.splitlines() == [
        "error: mlinfra:registryStack: no stack 'c' in stacks/ for the StackReference 'a/b/c': the offline preview "
        "runs the referenced stack's own file, so it must be a stack of this project"
    ]


@pytest.mark.parametrize("reference", ["/", "a//b", "a/b/c/d", "../registry", "a/b c"])
@pytest.mark.parametrize(
    "stack, key",
    [("serving-demo", "mlinfra:registryStack"), ("registry-gcp-mirror", "mlinfra:registry.mirror.sourceStack")],
)
def test_a_stack_reference_that_is_not_one_is_named_by_its_key(capsys, stack, key, reference):
    code, err = run(capsys, "preview", "--stack", stack, "-c", f"{key}={reference}")
    assert code == 2 and err.startswith(f"error: {key}: {reference!r} is not a stack reference: "), err


def test_model_config_that_is_not_a_small_regular_file(capsys, tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)  # reading it would wait for a writer for ever
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (1024 * 1024 + 1))
    for path, words in (
        (fifo, "not a regular file"),
        ("/dev/zero", "not a regular file"),
        (big, "bytes; a config.json"),
    ):
        code, err = run(
            capsys, "preview", "--stack", "serving-demo", "-c", f"mlinfra:serving.models[0].modelConfig={path}"
        )
        assert code == 2
        assert err.startswith(f"error: mlinfra:serving.models[0].modelConfig: {path}: ") and words in err


def test_a_training_command_that_starts_with_a_torchrun_option(capsys):
    key = "mlinfra:training.job.command"
    code, err = run(capsys, "preview", "--stack", "training-demo", "-c", f"{key}[0]=--master-addr")
    assert code == 2 and err.startswith(f"error: {key}: command[0] is '--master-addr', a torchrun option")
    code, err = run(capsys, "preview", "--stack", "training-demo", "-c", f"{key}[0]=-m", "-c", f"{key}[1]=--nnodes=9")
    assert code == 2 and "a torchrun option" in err
    code, _ = run(capsys, "preview", "--stack", "training-demo", "-c", f"{key}[0]=-m", "-c", f"{key}[1]=mypkg.train")
    assert code == 0  # torchrun -m <module>: a module for a script, as torchrun allows


def test_cost_hours_beyond_ten_years(capsys):
    code, err = run(capsys, "cost", "--stack", "training-demo", "--hours", "1e308")
    assert code == 2 and err.startswith("error: --hours: '1e308' is more than 87,600 hours")


def test_integers_past_pythons_digit_limit(capsys, tmp_path):
    digits = "9" * 5000
    code, err = run(capsys, "preview", "--stack", "training-demo", "-c", f"mlinfra:training.nodeCount={digits}")
    assert code == 2 and err.startswith("error: mlinfra:training.nodeCount: Input should be a valid integer (got '999")
    assert "(5,002 characters)" in err and len(err) < 300  # the value is not echoed whole
    # A stack file holding one (read by the one YAML reader every stack file goes through; a file of its own here,
    # not in stacks/, where other tests list the stacks at the same time).
    path = tmp_path / "Pulumi.big.yaml"
    path.write_text(f"config:\n  mlinfra:x: {digits}\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_yaml(path, "stacks/Pulumi.big.yaml")
    (problem,) = caught.value.problems
    assert str(problem).startswith("stacks/Pulumi.big.yaml: a value no config can hold: ")


@pytest.mark.parametrize(
    "region, message",
    [
        ("nowhere-9", "--region: must be an AWS region name such as us-east-1 (got 'nowhere-9')"),
        ("us-east-9", "--region: us-east-9 is not an AWS region (the pinned botocore's partitions.json lists"),
    ],
)
def test_audit_refuses_a_region_before_asking_for_credentials(region, message):
    result = run_cli("audit", "--run-id", "r1", "--region", region, env={"AWS_PROFILE": "", "AWS_ACCESS_KEY_ID": ""})
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr and "credentials" not in result.stderr


@pytest.mark.parametrize("bucket", ["a..b", "data-.bucket", "data.-bucket", "192.168.1.7"])
def test_a_gcs_bucket_name_cloud_storage_refuses_exits_2_before_the_program(bucket):
    result = run_cli("preview", "--stack", "training-gcp-demo", "-c", f"mlinfra:training.dataBucket={bucket}")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error: mlinfra:training.dataBucket: ") and "Traceback" not in result.stderr


def test_a_gcs_bucket_name_with_underscores_runs_the_gcp_program():
    """Valid in Cloud Storage (not in S3): the GCP bootstrap checks its markers' bucket by GCS's rules."""
    result = run_cli("preview", "--stack", "training-gcp-demo", "-c", "mlinfra:training.dataBucket=team_data.v2")
    assert result.returncode == 0, result.stdout + result.stderr


URN = "urn:pulumi:s::p::aws:s3/bucket:Bucket::b"


@pytest.mark.parametrize(
    "state, message",
    [
        ({"inputs": []}, "steps[0].newState.inputs must be an object (got list)"),
        (
            {"inputs": {}, "dependencies": "urn:pulumi:x"},
            "steps[0].newState.dependencies must be a list of URN strings",
        ),
        (
            {"inputs": {}, "propertyDependencies": {"a": "b"}},
            "steps[0].newState.propertyDependencies must be an object",
        ),
        ({"inputs": {}, "protect": "yes"}, "steps[0].newState.protect must be true or false (got str)"),
        ({"inputs": {}, "parent": 7}, "steps[0].newState.parent must be a URN string (got int)"),
    ],
)
@pytest.mark.parametrize("verb", ["policy", "simulate"])
def test_wrong_typed_fields_of_a_preview_document_are_named(tmp_path, verb, state, message):
    """A field of the wrong type is refused by name, never read as empty or as a string's characters (a string
    of dependencies became one dependency per character)."""
    document = {"steps": [{"op": "create", "urn": URN, "newState": {"type": "aws:s3/bucket:Bucket", **state}}]}
    path = tmp_path / "preview.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    result = run_cli(verb, "--preview-json", str(path))
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"error: --preview-json: {path}: {message}" in result.stderr


def test_the_preview_json_carries_unknowns_as_the_engine_does_and_a_stable_order():
    """No Python repr of an unknown (the document is read by other tools), and the same document from run to run
    but for its duration: dependencies are registered as outputs resolve, in an order that varies."""
    from pulumi.runtime.rpc import UNKNOWN

    runs = []
    for _ in range(2):
        result = run_cli("preview", "--stack", "serving-demo", "--json")
        assert result.returncode == 0, result.stderr
        document = json.loads(result.stdout)
        document.pop("duration")
        runs.append(document)
    assert runs[0] == runs[1]
    text = json.dumps(runs[0])
    assert "object at 0x" not in text and "pulumi.output" not in text
    assert UNKNOWN in text  # the autoscaling group names, known only once EKS has made the groups
    for step in runs[0]["steps"]:
        assert step["newState"]["dependencies"] == sorted(step["newState"]["dependencies"])


def test_a_stack_config_too_large_to_hand_to_the_pack_exits_2(tmp_path):
    """The pack gets the stack config in one environment variable (as from the engine); past Linux's limit for
    one variable the start failed with E2BIG (exit 3)."""
    path = tmp_path / "preview.json"
    path.write_text(
        json.dumps({"config": {f"mlinfra:k{i}": "v" for i in range(10_000)}, "steps": []}), encoding="utf-8"
    )
    result = run_cli("policy", "--preview-json", str(path))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error: config: the stack config is 218,890 bytes as JSON (10,000 keys)")


WINDOWS = "mlinfra:serving.models[1].schedule.windows"


@pytest.mark.parametrize(
    ("overrides", "key", "words"),
    [
        ([f"{WINDOWS}[0].to=08:00"], "mlinfra:serving.models[1].schedule", "windows[1]: overlaps windows[0]"),
        ([f"{WINDOWS}[3].to=20:00"], "mlinfra:serving.models[1].schedule", "the week from Sat 20:00 to Sun 00:00"),
        ([f"{WINDOWS}[0].from=07:00"], "mlinfra:serving.models[1].schedule", "not after it starts"),
        (["mlinfra:serving.models[1].schedule.timezone=Europe/Atlantis"], "mlinfra:serving.models[1].schedule.timezone",
         "not an IANA time zone"),
        (["mlinfra:serving.models[1].minReplicas=2"], "mlinfra:serving.models[1]", "leave minReplicas unset"),
        (["mlinfra:serving.models[1].scaleToZero.holdSeconds=400"], "mlinfra:serving.models[1].scaleToZero.holdSeconds",
         "must be at most 300"),
        (["mlinfra:serving.models[1].scaleToZero.clientTimeoutSeconds=60"], "mlinfra:serving.models[1].scaleToZero",
         "longer than clientTimeoutSeconds 60"),
        (["mlinfra:serving.models[1].scaleToZero.cooldownSeconds=300"],
         "mlinfra:serving.models[1].scaleToZero.cooldownSeconds", "shorter than the replica's start-up from zero"),
        (["mlinfra:serving.models[1].scaleToZero.holdSeconds=60"], "mlinfra:serving.models[1].scaleToZero.holdSeconds",
         "even on a node that is still up"),
        (["mlinfra:serving.models[0].minReplicas=0"], "mlinfra:serving.models[0]", "needs scaleToZero"),
        (["mlinfra:serving.models[0].scaleToZero.holdSeconds=240"], "mlinfra:serving.models[0].scaleToZero",
         "nothing goes to zero"),
    ],
    ids=["overlap", "gap", "inverted", "zone", "min-and-schedule", "hold-cap", "hold-past-client", "cooldown",
         "hold-short", "zero-unasked", "zero-without-zero"],
)  # fmt: skip
def test_schedules_and_holds_that_cannot_work_exit_2_naming_the_key(capsys, overrides, key, words):
    argv = ["preview", "--stack", "serving-demo"]
    for override in overrides:
        argv += ["-c", override]
    code, err = run(capsys, *argv)
    assert code == 2, err
    line = next((line for line in err.splitlines() if words in line), None)
    assert line is not None and line.startswith(f"error: {key}"), err


@pytest.mark.parametrize("key", ["mlinfra:serving.models[1].image", "mlinfra:serving.converterImage"])
def test_a_latest_image_is_refused_as_the_pack_refuses_it(capsys, key):
    code, err = run(capsys, "preview", "--stack", "serving-demo", "-c", f"{key}=docker.io/vllm/vllm-openai:latest")
    assert code == 2
    assert err.splitlines()[0].startswith(f"error: {key}: ") and "is :latest, which moves" in err


@pytest.mark.parametrize("cidr", ["10.20.0.0/16", "192.168.1.0/24", "100.64.0.0/16", "127.0.0.1/32"])
def test_a_private_range_in_the_eks_public_endpoint_list_admits_nobody(capsys, cidr):
    key = "mlinfra:serving.cluster.endpoint.publicAccessCidrs[1]"
    code, err = run(capsys, "preview", "--stack", "serving-demo", "-c", f"{key}={cidr}")
    assert code == 2
    assert err.splitlines() == [
        f"error: {key}: {cidr} is a private range: the public endpoint sees only public sources, so it admits "
        "nobody; list your runners' and VPN's public egress (the VPC reaches the private endpoint already, and so "
        "does a VPN into it)"
    ]
