"""The lifecycle verbs through `python -m infra`'s `main`, with the adapters swapped for stand-ins."""

from __future__ import annotations

import io

import pytest

from infra.cli import main
from tests.infra.ops.lifecycle.recording import (
    RUN_ID,
    FakeClock,
    RecordingCloud,
    RecordingStacks,
    deployed_world,
    runtime,
)

STACK = "training-demo"


@pytest.fixture
def world(monkeypatch):
    world = deployed_world(export_states=["succeeded"])
    regions = []
    monkeypatch.setattr("infra.ops.lifecycle.cli._stacks", lambda: RecordingStacks(world))
    # The real run_cloud, which picks the region; the cloud it builds there is the recording one.
    monkeypatch.setattr(
        "infra.ops.lifecycle.aws.cloud.AwsRunCloud", lambda region: regions.append(region) or RecordingCloud(world)
    )
    monkeypatch.setattr("infra.ops.lifecycle.cli.terminal_runtime", lambda: runtime(FakeClock()))
    world.regions = regions
    return world


def test_teardown_yes_tears_the_stack_down_in_its_region(world):
    assert main(["teardown", "--stack", STACK, "--yes"]) == 0
    assert STACK not in world.stacks
    assert world.regions == ["us-east-1"]


@pytest.mark.parametrize(
    ("outputs", "region"),
    [({"region": "us-east-2"}, "us-east-2"), ({"availabilityZone": "eu-west-1b"}, "eu-west-1"), ({}, "us-east-1")],
)
def test_teardown_acts_in_the_region_the_outputs_name_not_the_files(world, outputs, region):
    """Deployed in us-east-2, the stack file says us-east-1 since: the file system is looked for where it is.
    Stacks deployed before the `region` output are placed by their availability zone."""
    world.stacks[STACK].outputs.update(outputs)
    assert main(["teardown", "--stack", STACK, "--yes"]) == 0
    assert world.regions == [region]


def test_teardown_without_yes_and_without_a_terminal_changes_nothing(world, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["teardown", "--stack", STACK]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --yes: required to tear down without a terminal to confirm on (nothing was changed)"
    )
    assert world.calls == []


def test_teardown_asks_on_a_terminal(world, monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    assert main(["teardown", "--stack", STACK]) == 0
    assert world.calls == []


def test_an_unknown_stack_names_the_flag_and_the_known_ones(world, capsys):
    assert main(["teardown", "--stack", "training-dmeo", "--yes"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --stack: unknown stack 'training-dmeo' (did you mean 'training-demo'?)")
    assert world.calls == []


def test_a_failed_pulumi_operation_is_one_line_exit_1(world, monkeypatch, capsys):
    def broken_config(self, stack):
        from infra.ops.lifecycle.ports import StackOpsError

        raise StackOpsError("config", stack, "error: getting stack config: passphrase must be set")

    monkeypatch.setattr(RecordingStacks, "config", broken_config)
    assert main(["teardown", "--stack", STACK, "--yes"]) == 1
    assert capsys.readouterr().err.strip() == (
        "error: pulumi config of stack 'training-demo' failed: error: getting stack config: passphrase must be set"
    )


def test_reap_is_a_dry_run_unless_executed(world):
    world.stacks[STACK].outputs["expiresAt"] = "2026-03-01T09:00:00Z"  # before the fake clock's now
    assert main(["reap"]) == 0
    assert "destroy" not in world.names()
    assert main(["reap", "--execute"]) == 0
    assert STACK not in world.stacks


def test_audit_hands_over_to_the_audit_command(monkeypatch):
    seen = []
    monkeypatch.setattr(
        "infra.ops.lifecycle.audit.audit_main",
        lambda run_id, region, as_json: seen.append((run_id, region, as_json)) or 1,
    )
    assert main(["audit", "--run-id", RUN_ID, "--region", "eu-west-1", "--json"]) == 1
    assert seen == [(RUN_ID, "eu-west-1", True)]


def _client_error():
    from botocore.exceptions import ClientError

    return ClientError(
        {"Error": {"Code": "ExpiredToken", "Message": "The security token included in the request is expired"}},
        "TerminateInstances",
    )


def _no_credentials():
    from botocore.exceptions import NoCredentialsError

    return NoCredentialsError()


def _no_endpoint():
    from botocore.exceptions import EndpointConnectionError

    return EndpointConnectionError(endpoint_url="https://ec2.us-east-1.amazonaws.com/")


@pytest.mark.parametrize(
    "error, line",
    [
        (_client_error, "error: AWS: ExpiredToken: The security token included in the request is expired"),
        (_no_credentials, "error: AWS: NoCredentialsError: Unable to locate credentials"),
        (
            _no_endpoint,
            "error: AWS: EndpointConnectionError: Could not connect to the endpoint URL: "
            '"https://ec2.us-east-1.amazonaws.com/"',
        ),
    ],
)
def test_an_aws_failure_is_one_line_exit_1_not_an_internal_error(world, monkeypatch, capsys, error, line):
    def failing(self, run_id):
        raise error()

    monkeypatch.setattr(RecordingCloud, "stop_compute", failing)
    assert main(["teardown", "--stack", STACK, "--yes"]) == 1
    assert capsys.readouterr().err.splitlines() == [line]
    assert "destroy" not in world.names()


def test_anything_else_unexpected_is_still_an_internal_error_exit_3(world, monkeypatch, capsys):
    def failing(self, run_id):
        raise ValueError("a bug")

    monkeypatch.setattr(RecordingCloud, "stop_compute", failing)
    monkeypatch.delenv("MLINFRA_DEBUG", raising=False)
    assert main(["teardown", "--stack", STACK, "--yes"]) == 3
    assert capsys.readouterr().err.startswith("internal error: ValueError: a bug")


def test_audit_without_credentials_stays_bad_input_exit_2(monkeypatch, capsys):
    def no_credentials(run_id, session):
        raise _no_credentials()

    monkeypatch.setattr("infra.ops.lifecycle.audit.audit", no_credentials)
    assert main(["audit", "--run-id", RUN_ID, "--region", "us-east-1"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: no AWS credentials: set AWS_PROFILE or the AWS_ACCESS_KEY_ID variables"
    )
