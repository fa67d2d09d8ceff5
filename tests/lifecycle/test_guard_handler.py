"""The run guard Lambda, called in-process (run_guard.handler.handler) against the moto server."""
from __future__ import annotations

import io
import json
import re
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError

from run_guard import actions, config as guard_config, guard
from run_guard.handler import handler
from tests.lifecycle.aws_world import REGISTRY, instance_states, make_run, object_versions

ROOT = Path(__file__).resolve().parents[2]
FUNCTION = "mlinfra-guard-run-a"


class Context:
    """The bits of the Lambda context the guard reads."""

    def __init__(self, arn: str, millis: int = 1_000):
        self.invoked_function_arn, self.millis = arn, millis

    def get_remaining_time_in_millis(self) -> int:
        return self.millis


@pytest.fixture
def env(monkeypatch, registry):
    values = {"MLINFRA_RUN_ID": "run-a", "MLINFRA_REGISTRY_BUCKET": registry,
              "MLINFRA_TEARDOWN_ON_COMPLETION": "true", "MLINFRA_EXPORT_CHECKPOINTS": "true"}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("MLINFRA_CHECKPOINTS_PATH", raising=False)
    return values


@pytest.fixture
def context(aws) -> Context:
    """The guard function, deployed in the emulator so the self re-invocation (Invoke, Event) lands."""
    role = aws.iam.create_role(RoleName="guard", AssumeRolePolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                "Principal": {"Service": "lambda.amazonaws.com"}}]}))["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        for path in (ROOT / "run_guard").glob("*.py"):
            archive.write(path, f"run_guard/{path.name}")
    arn = aws.lambda_.create_function(FunctionName=FUNCTION, Runtime="python3.12", Role=role,
                                      Handler="run_guard.handler.handler", Code={"ZipFile": code.getvalue()},
                                      Timeout=900)["FunctionArn"]
    return Context(arn)


def s3_event(key: str, bucket: str = REGISTRY, detail_type: str = "Object Created") -> dict:
    """An S3 event as EventBridge delivers it (S3 user guide, "EventBridge event message structure")."""
    return {"version": "0", "id": "17793124-05d4-b198-2fde-7ededc63b103", "detail-type": detail_type,
            "source": "aws.s3", "account": "123456789012", "time": "2026-11-21T10:00:00Z", "region": "us-east-1",
            "resources": [f"arn:aws:s3:::{bucket}"],
            "detail": {"version": "0", "bucket": {"name": bucket},
                       "object": {"key": key, "size": 180, "etag": "b1946ac92492d2347c6235b4d2611184",
                                  "version-id": "IYV3p45BT0ac8hjHg1houSdS1a.Mro8e", "sequencer": "617f08299329d189"},
                       "request-id": "N4N7GDK58NMKJ12R", "requester": "123456789012",
                       "source-ip-address": "10.0.0.12", "reason": "PutObject"}}


def put_marker(aws, run_id: str, status: str) -> None:
    aws.s3.put_object(Bucket=REGISTRY, Key=f"runs/{run_id}/_{status}",
                      Body=json.dumps({"run_id": run_id, "status": status, "exit_code": 0}).encode())


def reports(aws, run_id: str = "run-a") -> list[tuple[str, dict]]:
    listed = aws.s3.list_objects_v2(Bucket=REGISTRY, Prefix=f"runs/{run_id}/guard/").get("Contents", [])
    return [(o["Key"], json.loads(aws.s3.get_object(Bucket=REGISTRY, Key=o["Key"])["Body"].read())) for o in listed]


def billing(aws, run_id: str) -> list[str]:
    return actions.run_instances(aws.ec2, run_id, actions.BILLING_STATES)


def file_system_exists(aws, fs_id: str) -> bool:
    return any(fs["FileSystemId"] == fs_id for fs in aws.fsx.describe_file_systems()["FileSystems"])


def tasks(aws, fs_id: str) -> list[dict]:
    return actions.export_tasks(aws.fsx, fs_id)


# --- completion --------------------------------------------------------------------------------

@pytest.mark.parametrize("status", ["SUCCESS", "FAILED"])
def test_completion_terminates_the_runs_instances_only_and_leaves_the_registry_untouched(aws, env, context, status):
    run_a, run_b = make_run(aws, "run-a", nodes=3), make_run(aws, "run-b", nodes=2)
    put_marker(aws, "run-a", status)
    before = object_versions(aws)

    result = handler(s3_event(f"runs/run-a/_{status}"), context)

    assert billing(aws, "run-a") == []
    assert set(instance_states(aws, run_a.instance_ids).values()) == {"terminated"}
    assert set(instance_states(aws, run_b.instance_ids).values()) == {"running"}
    assert sorted(result["terminated"]) == sorted(run_a.instance_ids)
    after = object_versions(aws)
    assert before <= after, "a registry object version was deleted or changed"
    new = after - before
    assert len(new) == 1 and re.fullmatch(r"runs/run-a/guard/\d{8}T\d{6}\.\d{6}Z-completion\.json", next(iter(new))[0])
    assert file_system_exists(aws, run_a.file_system_id), "completion leaves the file system to teardown"


def test_completion_only_records_when_teardown_on_completion_is_false(aws, env, context, monkeypatch):
    monkeypatch.setenv("MLINFRA_TEARDOWN_ON_COMPLETION", "false")
    run_a = make_run(aws, "run-a")
    result = handler(s3_event("runs/run-a/_SUCCESS"), context)
    assert set(instance_states(aws, run_a.instance_ids).values()) == {"running"}
    assert result["outcome"] == "recorded (teardownOnCompletion is false)"
    [(_, body)] = reports(aws)
    assert body["marker"] == "SUCCESS" and body["terminated"] == []


def test_completion_twice_is_harmless(aws, env, context):
    run_a = make_run(aws, "run-a")
    first = handler(s3_event("runs/run-a/_SUCCESS"), context)
    second = handler(s3_event("runs/run-a/_SUCCESS"), context)
    assert sorted(first["terminated"]) == sorted(run_a.instance_ids)
    assert second["terminated"] == [] and second["outcome"] == "no-running-compute"
    assert len({key for key, _ in reports(aws)}) == 2


@pytest.mark.parametrize("event", [
    s3_event("runs/run-b/_SUCCESS"),
    s3_event("runs/run-a/_SUCCESS", bucket="someone-elses-bucket"),
    s3_event("runs/run-ab/_SUCCESS"),
    s3_event("runs/run-a/_SUCCESS.tmp"),
    s3_event("runs/run-a/guard/20261121T100000.000000Z-completion.json"),
    s3_event("checkpoints/run-a/_SUCCESS"),
    s3_event("runs/run-a/_SUCCESS", detail_type="Object Deleted"),
    {"action": "stop-everything"},
    {"detail": "not an object"},
    ["not", "an", "object"],
], ids=["other-run", "other-bucket", "run-id-prefix", "other-name", "own-report", "outside-runs",
        "deleted", "unknown-action", "bad-detail", "not-a-dict"])
def test_events_for_another_run_bucket_or_key_do_nothing(aws, env, context, event):
    run_a, run_b = make_run(aws, "run-a"), make_run(aws, "run-b")
    before = object_versions(aws)
    result = handler(event, context)
    assert result["outcome"] == "ignored" and result["reason"]
    assert set(instance_states(aws, run_a.instance_ids + run_b.instance_ids).values()) == {"running"}
    assert object_versions(aws) == before
    assert file_system_exists(aws, run_a.file_system_id)


# --- expiry ------------------------------------------------------------------------------------

def test_expiry_keeps_the_file_system_while_the_export_runs_and_deletes_it_once_it_succeeded(aws, env, context):
    run_a, run_b = make_run(aws, "run-a"), make_run(aws, "run-b")
    before = object_versions(aws)

    first = handler({"action": "expire"}, context)
    assert billing(aws, "run-a") == [] and len(billing(aws, "run-b")) == 2
    [task] = tasks(aws, run_a.file_system_id)
    assert (task["Type"], task["Paths"], task["Report"]) == ("EXPORT_TO_REPOSITORY", ["checkpoints"], {"Enabled": False})
    assert task["Tags"] == [{"Key": "mlinfra:run-id", "Value": "run-a"}]
    assert first["export"]["state"] == "started" and first["reinvoked"] is True
    assert first["continue"] == {"action": "expire", "round": 1, "started_at": first["continue"]["started_at"],
                                 "stopped_at": first["stopped_at"], "task_ids": [task["TaskId"]]}
    assert file_system_exists(aws, run_a.file_system_id)

    aws.set_task(task["TaskId"], "EXECUTING")
    second = handler(first["continue"], context)
    assert second["export"]["state"] == "running" and second["continue"]["round"] == 2
    assert len(tasks(aws, run_a.file_system_id)) == 1, "no second export while one runs"
    assert file_system_exists(aws, run_a.file_system_id)

    aws.set_task(task["TaskId"], "SUCCEEDED")
    third = handler(second["continue"], context)
    assert third["export"]["state"] == "succeeded" and third["continue"] is None
    assert not file_system_exists(aws, run_a.file_system_id)
    assert file_system_exists(aws, run_b.file_system_id)
    assert third["outcome"] == "compute-stopped; checkpoints exported; file system deleted"
    assert {k for k, _, _ in object_versions(aws) - before} == {key for key, _ in reports(aws)}


def test_expiry_polls_within_one_invocation_until_the_export_succeeds(aws, env, context):
    run_a = make_run(aws, "run-a")
    slept = []

    def sleep(seconds):  # the export finishes while the guard waits
        slept.append(seconds)
        aws.set_task(tasks(aws, run_a.file_system_id)[0]["TaskId"], "SUCCEEDED")

    config = guard_config.load_config(env)
    clients = guard.Clients(ec2=aws.ec2, fsx=aws.fsx, s3=aws.s3)
    result = guard.handle({"action": "expire"}, config, clients, remaining_millis=lambda: 900_000, sleep=sleep)
    assert slept == [guard_config.EXPORT_POLL_SECONDS] and result["polls"] == 1
    assert not file_system_exists(aws, run_a.file_system_id) and result["continue"] is None


def test_an_export_that_succeeded_before_compute_stopped_does_not_count(aws, env, context):
    run_a = make_run(aws, "run-a")
    early = aws.fsx.create_data_repository_task(Type="EXPORT_TO_REPOSITORY", FileSystemId=run_a.file_system_id,
                                                Paths=["checkpoints"], Report={"Enabled": False})
    aws.set_task(early["DataRepositoryTask"]["TaskId"], "SUCCEEDED")
    result = handler({"action": "expire"}, context)
    assert result["export"]["state"] == "started" and len(tasks(aws, run_a.file_system_id)) == 2
    assert file_system_exists(aws, run_a.file_system_id)


def test_a_failed_export_keeps_the_file_system_retries_and_reports(aws, env, context):
    run_a = make_run(aws, "run-a")
    event = {"action": "expire"}
    for attempt in range(guard_config.MAX_EXPORT_ATTEMPTS):
        result = handler(event, context)
        assert result["export"]["state"] == "started" and file_system_exists(aws, run_a.file_system_id)
        aws.set_task(result["export"]["task_id"], "FAILED", f"S3 access denied (attempt {attempt + 1})")
        event = result["continue"]
    final = handler(event, context)
    assert final["export"]["state"] == "failed" and final["continue"] is None
    assert final["outcome"].startswith("export-failed; file system kept")
    assert "S3 access denied (attempt 3)" in final["outcome"]
    assert file_system_exists(aws, run_a.file_system_id)
    assert len(tasks(aws, run_a.file_system_id)) == guard_config.MAX_EXPORT_ATTEMPTS
    assert "S3 access denied (attempt 3)" in reports(aws)[-1][1]["export"]["detail"]


def test_expiry_without_export_deletes_the_file_system_once_compute_stopped(aws, env, context, monkeypatch):
    monkeypatch.setenv("MLINFRA_EXPORT_CHECKPOINTS", "false")
    run_a = make_run(aws, "run-a")
    result = handler({"action": "expire"}, context)
    assert billing(aws, "run-a") == [] and not file_system_exists(aws, run_a.file_system_id)
    assert tasks(aws, run_a.file_system_id) == [] and result["continue"] is None


def test_expiry_twice_is_harmless(aws, env, context):
    run_a = make_run(aws, "run-a")
    first, second = handler({"action": "expire"}, context), handler({"action": "expire"}, context)
    assert len(tasks(aws, run_a.file_system_id)) == 1 and second["export"]["state"] == "running"
    aws.set_task(first["export"]["task_id"], "SUCCEEDED")
    done = handler(first["continue"], context)
    again = handler(second["continue"], context)
    assert done["file_system_deletion"] == "deleting"
    assert again["outcome"] == "compute-stopped; no file system left" and again["continue"] is None


def test_expiry_gives_up_after_the_last_round_and_keeps_the_file_system(aws, env, context):
    run_a = make_run(aws, "run-a")
    result = handler({"action": "expire", "round": guard_config.MAX_ROUNDS - 1}, context)
    assert result["continue"] is None and result["outcome"].startswith("gave-up")
    assert file_system_exists(aws, run_a.file_system_id)


# --- reports and configuration -----------------------------------------------------------------

def test_reports_say_what_was_done(aws, env, context):
    run_a = make_run(aws, "run-a")
    handler(s3_event("runs/run-a/_FAILED"), context)
    handler({"action": "expire"}, context)
    (completion_key, completion), (expiry_key, expiry) = reports(aws)
    assert completion_key.endswith("-completion.json") and expiry_key.endswith("-expire.json")
    assert completion == {"run_id": "run-a", "action": "completion", "at": completion["at"], "marker": "FAILED",
                          "terminated": sorted(run_a.instance_ids), "outcome": "compute-terminating"}
    assert expiry["terminated"] == [] and expiry["compute"] == "stopped"
    assert expiry["file_system"] == run_a.file_system_id and expiry["export"]["state"] == "started"
    assert expiry["continue"]["round"] == 1 and expiry["outcome"] == "waiting; re-invoking"
    head = aws.s3.head_object(Bucket=REGISTRY, Key=expiry_key)
    assert head["ContentType"] == "application/json" and head["ServerSideEncryption"] == "aws:kms"


def test_a_failing_step_is_reported_and_raised_so_lambda_retries(aws, env):
    run_a = make_run(aws, "run-a")
    unreachable = aws.session.client("fsx", endpoint_url="http://127.0.0.1:9",
                                     config=Config(retries={"max_attempts": 1}, connect_timeout=2))
    clients = guard.Clients(ec2=aws.ec2, fsx=unreachable, s3=aws.s3)
    with pytest.raises(EndpointConnectionError):
        guard.handle({"action": "expire"}, guard_config.load_config(env), clients, remaining_millis=lambda: 1_000)
    [(_, body)] = reports(aws)
    assert body["outcome"].startswith("error: EndpointConnectionError")
    assert sorted(body["terminated"]) == sorted(run_a.instance_ids) and body["compute"] == "stopped"


def test_reports_never_overwrite_each_other(aws, registry):
    moment = datetime(2026, 11, 21, 10, 0, tzinfo=timezone.utc)
    keys = [actions.write_report(aws.s3, registry, "run-a", "expire", {"n": n}, moment) for n in range(3)]
    assert len(set(keys)) == 3
    assert [json.loads(aws.s3.get_object(Bucket=registry, Key=k)["Body"].read())["n"] for k in keys] == [0, 1, 2]


def test_a_misconfigured_guard_names_every_bad_variable(monkeypatch):
    env = {"MLINFRA_RUN_ID": "Run A", "MLINFRA_TEARDOWN_ON_COMPLETION": "yes", "MLINFRA_EXPORT_CHECKPOINTS": "true",
           "MLINFRA_CHECKPOINTS_PATH": "../etc"}
    with pytest.raises(guard_config.ConfigError) as error:
        guard_config.load_config(env)
    message = str(error.value)
    for expected in ("MLINFRA_RUN_ID='Run A' is invalid", "MLINFRA_REGISTRY_BUCKET is not set",
                     "MLINFRA_TEARDOWN_ON_COMPLETION='yes' is invalid: 'true' or 'false'",
                     "MLINFRA_CHECKPOINTS_PATH='../etc' is invalid"):
        assert expected in message
    assert "MLINFRA_EXPORT_CHECKPOINTS" not in message


def test_the_guard_agrees_with_the_lifecycle_limits_and_the_run_id_pattern():
    from infra.config.training import RUN_ID_PATTERN
    from infra.lifecycle import limits
    assert guard_config.EXPORT_POLL_SECONDS == limits.EXPORT_POLL_SECONDS
    assert guard_config.RUN_ID_PATTERN == RUN_ID_PATTERN
    assert guard_config.SAFETY_MILLIS < limits.GUARD_TIMEOUT_SECONDS * 1000 - guard_config.EXPORT_POLL_SECONDS * 1000


def test_the_guard_source_stands_alone():
    for path in (ROOT / "run_guard").glob("*.py"):
        imports = re.findall(r"^\s*(?:from|import)\s+([\w.]+)", path.read_text(), re.M)
        assert all(name.split(".")[0] in {"__future__", "run_guard", "boto3", "botocore", "json", "os", "re", "time",
                                          "dataclasses", "datetime", "typing"} for name in imports), path
