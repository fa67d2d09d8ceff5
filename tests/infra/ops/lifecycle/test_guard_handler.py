"""The run guard Lambda, called in-process (run_guard.handler.handler) against the moto server."""

from __future__ import annotations

import io
import json
import re
import zipfile
from datetime import UTC, datetime

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError

from run_guard import actions, guard
from run_guard import config as guard_config
from run_guard.handler import handler
from tests.helpers import ROOT
from tests.infra.ops.lifecycle.aws_world import (
    AMI,
    REGISTRY,
    export_task,
    file_system_state,
    instance_states,
    make_run,
    object_versions,
)

FUNCTION = "mlinfra-guard-run-a"
EXPIRES_AT = "2026-11-21T12:00:00Z"  # the expires-at tag aws_world.make_run gives a run
EXPIRES_EPOCH = int(datetime.fromisoformat("2026-11-21T12:00:00+00:00").timestamp())


class Context:
    """The bits of the Lambda context the guard reads."""

    def __init__(self, arn: str, millis: int = 1_000):
        self.invoked_function_arn, self.millis = arn, millis

    def get_remaining_time_in_millis(self) -> int:
        return self.millis


@pytest.fixture
def env(monkeypatch, registry):
    values = {
        "MLINFRA_RUN_ID": "run-a",
        "MLINFRA_REGISTRY_BUCKET": registry,
        "MLINFRA_TEARDOWN_ON_COMPLETION": "true",
        "MLINFRA_EXPORT_CHECKPOINTS": "true",
        "MLINFRA_EXPIRES_AT": EXPIRES_AT,
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("MLINFRA_CHECKPOINTS_PATH", raising=False)
    return values


@pytest.fixture
def context(aws) -> Context:
    """The guard function, deployed in the emulator so the self re-invocation (Invoke, Event) lands."""
    role = aws.iam.create_role(
        RoleName="guard",
        AssumeRolePolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": "lambda.amazonaws.com"}}
                ],
            }
        ),
    )["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        for path in (ROOT / "run_guard").glob("*.py"):
            archive.write(path, f"run_guard/{path.name}")
    arn = aws.lambda_.create_function(
        FunctionName=FUNCTION,
        Runtime="python3.12",
        Role=role,
        Handler="run_guard.handler.handler",
        Code={"ZipFile": code.getvalue()},
        Timeout=900,
    )["FunctionArn"]
    return Context(arn)


def s3_event(key: str, bucket: str = REGISTRY, detail_type: str = "Object Created") -> dict:
    """An S3 event as EventBridge delivers it (S3 user guide, "EventBridge event message structure")."""
    return {
        "version": "0",
        "id": "17793124-05d4-b198-2fde-7ededc63b103",
        "detail-type": detail_type,
        "source": "aws.s3",
        "account": "123456789012",
        "time": "2026-11-21T10:00:00Z",
        "region": "us-east-1",
        "resources": [f"arn:aws:s3:::{bucket}"],
        "detail": {
            "version": "0",
            "bucket": {"name": bucket},
            "object": {
                "key": key,
                "size": 180,
                "etag": "b1946ac92492d2347c6235b4d2611184",
                "version-id": "IYV3p45BT0ac8hjHg1houSdS1a.Mro8e",
                "sequencer": "617f08299329d189",
            },
            "request-id": "N4N7GDK58NMKJ12R",
            "requester": "123456789012",
            "source-ip-address": "10.0.0.12",
            "reason": "PutObject",
        },
    }


def put_marker(aws, run_id: str, status: str, expires_at: int | None = EXPIRES_EPOCH, **fields) -> None:
    """The marker as the node bootstrap writes it, for the deployment whose expires-at is `expires_at` (Unix)."""
    body = {"run_id": run_id, "status": status, "exit_code": 0, **fields}
    if expires_at is not None:
        body["expires_at"] = expires_at
    aws.s3.put_object(Bucket=REGISTRY, Key=f"runs/{run_id}/_{status}", Body=json.dumps(body).encode())


def reports(aws, run_id: str = "run-a") -> list[tuple[str, dict]]:
    listed = aws.s3.list_objects_v2(Bucket=REGISTRY, Prefix=f"runs/{run_id}/guard/").get("Contents", [])
    return [(o["Key"], json.loads(aws.s3.get_object(Bucket=REGISTRY, Key=o["Key"])["Body"].read())) for o in listed]


def billing(aws, run_id: str) -> list[str]:
    return actions.run_instances(aws.ec2, run_id, actions.BILLING_STATES)


def tasks(aws, fs_id: str) -> list[dict]:
    return actions.export_tasks(aws.fsx, fs_id)


# --- completion --------------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["SUCCESS", "FAILED"])
def test_completion_terminates_at_once_then_exports_and_deletes_the_file_system_after_the_export(
    aws, env, context, status
):
    run_a, run_b = make_run(aws, "run-a", nodes=3), make_run(aws, "run-b", nodes=2)
    put_marker(aws, "run-a", status)
    before = object_versions(aws)

    first = handler(s3_event(f"runs/run-a/_{status}"), context)

    assert billing(aws, "run-a") == []
    assert set(instance_states(aws, run_a.instance_ids).values()) == {"terminated"}
    assert set(instance_states(aws, run_b.instance_ids).values()) == {"running"}
    assert sorted(first["terminated"]) == sorted(run_a.instance_ids) and first["marker"] == status
    [task] = tasks(aws, run_a.file_system_id)
    assert first["export"] == {
        "state": "started",
        "task_id": task["TaskId"],
        "detail": f"export task {task['TaskId']} started",
        "failure_report_path": f"s3://{REGISTRY}/checkpoints/run-a/_export-reports",
    }
    assert first["continue"] == {
        "action": "finish-completion",
        "round": 1,
        "started_at": first["continue"]["started_at"],
        "stopped_at": first["stopped_at"],
        "task_ids": [task["TaskId"]],
        "marker": status,
    }
    assert first["reinvoked"] is True
    assert file_system_state(aws, run_a.file_system_id) == "AVAILABLE", "kept until the export succeeded"

    aws.set_task(task["TaskId"], "SUCCEEDED")
    second = handler(first["continue"], context)
    assert second["action"] == "completion" and second["round"] == 1 and second["continue"] is None
    assert second["outcome"] == "compute-stopped; checkpoints exported; file system deleting"
    assert file_system_state(aws, run_a.file_system_id) == "DELETING"
    assert file_system_state(aws, run_b.file_system_id) == "AVAILABLE" and tasks(aws, run_b.file_system_id) == []
    assert set(instance_states(aws, run_b.instance_ids).values()) == {"running"}
    after = object_versions(aws)
    assert before <= after, "a registry object version was deleted or changed"
    new_keys = sorted(key for key, _, _ in after - before)
    assert len(new_keys) == 2 and all(
        re.fullmatch(r"runs/run-a/guard/\d{8}T\d{6}\.\d{6}Z-completion\.json", key) for key in new_keys
    )


def test_completion_terminates_before_anything_else(aws, env):
    """Before anything else on EC2 and FSx: the marker is read first, to know it is this deployment's."""
    make_run(aws, "run-a")
    put_marker(aws, "run-a", "SUCCESS")
    calls = []
    clients = guard.Clients(ec2=aws.session.client("ec2"), fsx=aws.session.client("fsx"), s3=aws.s3)
    for client in (clients.ec2, clients.fsx):
        client.meta.events.register("before-call", lambda model, **_: calls.append(model.name))
    guard.handle(
        s3_event("runs/run-a/_SUCCESS"), guard_config.load_config(env), clients, remaining_millis=lambda: 1_000
    )
    assert calls[:2] == ["DescribeInstances", "TerminateInstances"]


def test_completion_keeps_the_file_system_when_the_export_fails(aws, env, context):
    run_a = make_run(aws, "run-a")
    put_marker(aws, "run-a", "SUCCESS")
    event = s3_event("runs/run-a/_SUCCESS")
    for _attempt in range(guard_config.MAX_EXPORT_ATTEMPTS):
        result = handler(event, context)
        aws.set_task(result["export"]["task_id"], "FAILED", "S3 access denied")
        event = result["continue"]
    final = handler(event, context)
    assert final["outcome"].startswith("export-failed; file system kept") and final["continue"] is None
    assert file_system_state(aws, run_a.file_system_id) == "AVAILABLE"


def test_completion_only_records_when_teardown_on_completion_is_false(aws, env, context, monkeypatch):
    monkeypatch.setenv("MLINFRA_TEARDOWN_ON_COMPLETION", "false")
    run_a = make_run(aws, "run-a")
    put_marker(aws, "run-a", "SUCCESS")
    result = handler(s3_event("runs/run-a/_SUCCESS"), context)
    assert set(instance_states(aws, run_a.instance_ids).values()) == {"running"}
    assert result["outcome"] == "recorded (teardownOnCompletion is false)"
    [(_, body)] = reports(aws)
    assert body["marker"] == "SUCCESS" and body["terminated"] == []
    assert tasks(aws, run_a.file_system_id) == [] and file_system_state(aws, run_a.file_system_id) == "AVAILABLE"


def test_completion_twice_is_harmless(aws, env, context):
    run_a = make_run(aws, "run-a")
    put_marker(aws, "run-a", "SUCCESS")
    first = handler(s3_event("runs/run-a/_SUCCESS"), context)
    second = handler(s3_event("runs/run-a/_SUCCESS"), context)
    assert sorted(first["terminated"]) == sorted(run_a.instance_ids)
    assert second["terminated"] == [] and second["export"]["state"] == "running"
    assert len(tasks(aws, run_a.file_system_id)) == 1 and len({key for key, _ in reports(aws)}) == 2


@pytest.mark.parametrize("expires_at", [EXPIRES_EPOCH - 86400, None], ids=["earlier-deployment", "deployment-not-said"])
def test_a_marker_another_deployment_wrote_stops_nothing(aws, env, context, expires_at):
    """A run id deployed again finds the earlier deployment's marker still in the registry: it must not end the
    new fleet."""
    run_a = make_run(aws, "run-a")
    put_marker(aws, "run-a", "SUCCESS", expires_at=expires_at, checkpoints_exported=True)
    result = handler(s3_event("runs/run-a/_SUCCESS"), context)
    assert result["outcome"].startswith("ignored: runs/run-a/_SUCCESS is not this deployment's (written for expires-at")
    assert result["terminated"] == [] and result.get("continue") is None
    assert set(instance_states(aws, run_a.instance_ids).values()) == {"running"}
    assert tasks(aws, run_a.file_system_id) == [] and file_system_state(aws, run_a.file_system_id) == "AVAILABLE"


def test_success_with_checkpoints_exported_by_the_nodes_only_terminates_compute(aws, env, context):
    """Nothing is left to export: starting an export task or deleting the file system would race teardown's
    destroy (DeleteFileSystem is refused while a data repository task is pending)."""
    run_a = make_run(aws, "run-a")
    put_marker(aws, "run-a", "SUCCESS", checkpoints_exported=True)
    result = handler(s3_event("runs/run-a/_SUCCESS"), context)
    assert result["outcome"] == "compute-stopping; checkpoints exported by the nodes; file system left to teardown"
    assert sorted(result["terminated"]) == sorted(run_a.instance_ids) and result.get("continue") is None
    assert billing(aws, "run-a") == []
    assert actions.repository_tasks(aws.fsx, run_a.file_system_id) == []
    assert file_system_state(aws, run_a.file_system_id) == "AVAILABLE"


def test_completion_terminates_only_the_instances_of_its_own_deployment(aws, env, context):
    run_a = make_run(aws, "run-a")
    later = [
        {**tag, "Value": "2026-11-22T12:00:00Z"} if tag["Key"] == "mlinfra:expires-at" else tag for tag in run_a.tags
    ]
    other = aws.ec2.run_instances(
        ImageId=AMI,
        MinCount=2,
        MaxCount=2,
        InstanceType="t3.micro",
        SubnetId=run_a.subnet_id,
        TagSpecifications=[{"ResourceType": "instance", "Tags": later}],
    )["Instances"]
    put_marker(aws, "run-a", "FAILED")
    result = handler(s3_event("runs/run-a/_FAILED"), context)
    assert sorted(result["terminated"]) == sorted(run_a.instance_ids)
    assert set(instance_states(aws, run_a.instance_ids).values()) == {"terminated"}
    assert set(instance_states(aws, [i["InstanceId"] for i in other]).values()) == {"running"}


@pytest.mark.parametrize(
    "event",
    [
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
    ],
    ids=[
        "other-run",
        "other-bucket",
        "run-id-prefix",
        "other-name",
        "own-report",
        "outside-runs",
        "deleted",
        "unknown-action",
        "bad-detail",
        "not-a-dict",
    ],
)
def test_events_for_another_run_bucket_or_key_do_nothing(aws, env, context, event):
    run_a, run_b = make_run(aws, "run-a"), make_run(aws, "run-b")
    before = object_versions(aws)
    result = handler(event, context)
    assert result["outcome"] == "ignored" and result["reason"]
    assert set(instance_states(aws, run_a.instance_ids + run_b.instance_ids).values()) == {"running"}
    assert object_versions(aws) == before
    assert file_system_state(aws, run_a.file_system_id) == "AVAILABLE"


# --- expiry ------------------------------------------------------------------------------------


def test_expiry_keeps_the_file_system_while_the_export_runs_and_deletes_it_once_it_succeeded(aws, env, context):
    run_a, run_b = make_run(aws, "run-a"), make_run(aws, "run-b")
    before = object_versions(aws)

    first = handler({"action": "expire"}, context)
    assert billing(aws, "run-a") == [] and len(billing(aws, "run-b")) == 2
    [task] = tasks(aws, run_a.file_system_id)
    assert (task["Type"], task["Paths"]) == ("EXPORT_TO_REPOSITORY", ["checkpoints"])
    assert task["Report"] == {
        "Enabled": True,
        "Path": f"s3://{REGISTRY}/checkpoints/run-a/_export-reports",
        "Format": "REPORT_CSV_20191124",
        "Scope": "FAILED_FILES_ONLY",
    }
    assert task["Tags"] == [{"Key": "mlinfra:run-id", "Value": "run-a"}]
    assert first["export"]["state"] == "started" and first["reinvoked"] is True
    assert first["continue"] == {
        "action": "expire",
        "round": 1,
        "started_at": first["continue"]["started_at"],
        "stopped_at": first["stopped_at"],
        "task_ids": [task["TaskId"]],
    }
    assert file_system_state(aws, run_a.file_system_id) == "AVAILABLE"

    aws.set_task(task["TaskId"], "EXECUTING")
    second = handler(first["continue"], context)
    assert second["export"]["state"] == "running" and second["continue"]["round"] == 2
    assert len(tasks(aws, run_a.file_system_id)) == 1, "no second export while one runs"
    assert file_system_state(aws, run_a.file_system_id) == "AVAILABLE"

    aws.set_task(task["TaskId"], "SUCCEEDED")
    third = handler(second["continue"], context)
    assert third["export"]["state"] == "succeeded" and third["continue"] is None
    assert file_system_state(aws, run_a.file_system_id) == "DELETING"
    assert file_system_state(aws, run_b.file_system_id) == "AVAILABLE"
    assert third["outcome"] == "compute-stopped; checkpoints exported; file system deleting"
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
    assert file_system_state(aws, run_a.file_system_id) == "DELETING" and result["continue"] is None


def test_an_export_that_succeeded_before_compute_stopped_does_not_count(aws, env, context):
    run_a = make_run(aws, "run-a")
    aws.set_task(export_task(aws, run_a.file_system_id), "SUCCEEDED")
    result = handler({"action": "expire"}, context)
    assert result["export"]["state"] == "started" and len(tasks(aws, run_a.file_system_id)) == 2
    assert file_system_state(aws, run_a.file_system_id) == "AVAILABLE"


def test_a_failed_export_keeps_the_file_system_retries_and_reports(aws, env, context):
    run_a = make_run(aws, "run-a")
    event = {"action": "expire"}
    for attempt in range(guard_config.MAX_EXPORT_ATTEMPTS):
        result = handler(event, context)
        assert result["export"]["state"] == "started" and file_system_state(aws, run_a.file_system_id) == "AVAILABLE"
        aws.set_task(result["export"]["task_id"], "FAILED", f"S3 access denied (attempt {attempt + 1})")
        event = result["continue"]
    final = handler(event, context)
    assert final["export"]["state"] == "failed" and final["continue"] is None
    assert final["outcome"].startswith("export-failed; file system kept")
    assert "S3 access denied (attempt 3)" in final["outcome"]
    assert file_system_state(aws, run_a.file_system_id) == "AVAILABLE"
    assert len(tasks(aws, run_a.file_system_id)) == guard_config.MAX_EXPORT_ATTEMPTS
    last = reports(aws)[-1][1]["export"]
    report_path = f"s3://{REGISTRY}/checkpoints/run-a/_export-reports"
    assert "S3 access denied (attempt 3)" in last["detail"] and f"failed files: {report_path}/" in last["detail"]
    assert last["failure_report_path"] == report_path


def test_expiry_without_export_deletes_the_file_system_once_compute_stopped(aws, env, context, monkeypatch):
    monkeypatch.setenv("MLINFRA_EXPORT_CHECKPOINTS", "false")
    run_a = make_run(aws, "run-a", export_checkpoints=False)
    result = handler({"action": "expire"}, context)
    assert billing(aws, "run-a") == [] and file_system_state(aws, run_a.file_system_id) == "DELETING"
    assert tasks(aws, run_a.file_system_id) == [] and result["continue"] is None


def test_expiry_deletes_a_file_system_that_was_never_linked_and_says_so(aws, env, context):
    """No association (the launcher died while FSx created it): no export can run and none is needed; the guard
    deletes the file system instead of failing on every round while it bills."""
    run_a = make_run(aws, "run-a", linked=False)
    result = handler({"action": "expire"}, context)
    assert billing(aws, "run-a") == [] and file_system_state(aws, run_a.file_system_id) == "DELETING"
    assert tasks(aws, run_a.file_system_id) == [] and result["continue"] is None
    assert result["outcome"] == "compute-stopped; nothing linked to export through; file system deleting"
    assert result["export"]["state"] == "nothing-linked" and run_a.file_system_id in result["export"]["detail"]
    [(_, written)] = [(k, r) for k, r in reports(aws) if r.get("outcome") == result["outcome"]]
    assert written["export"]["detail"].endswith("nothing to export")


def test_expiry_twice_is_harmless(aws, env, context):
    run_a = make_run(aws, "run-a")
    first, second = handler({"action": "expire"}, context), handler({"action": "expire"}, context)
    assert len(tasks(aws, run_a.file_system_id)) == 1 and second["export"]["state"] == "running"
    aws.set_task(first["export"]["task_id"], "SUCCEEDED")
    done = handler(first["continue"], context)
    again = handler(second["continue"], context)  # the emulator, like FSx, refuses a second delete
    assert done["file_system_deletion"] == "deleting"
    assert again["outcome"] == "compute-stopped; file system being deleted" and again["continue"] is None
    assert again["file_system_deletion"] == "already-deleting"
    aws.set_file_system(run_a.file_system_id, "DELETED")
    gone = handler(second["continue"], context)
    assert gone["outcome"] == "compute-stopped; no file system left"


def test_expiry_gives_up_after_the_last_round_and_keeps_the_file_system(aws, env, context):
    run_a = make_run(aws, "run-a")
    result = handler({"action": "expire", "round": guard_config.MAX_ROUNDS - 1}, context)
    assert result["continue"] is None and result["outcome"].startswith("gave-up")
    assert file_system_state(aws, run_a.file_system_id) == "AVAILABLE"


def test_rounds_beyond_lambdas_loop_detection_need_recursion_allowed():
    """Lambda stops a self-invocation chain after about 16 calls unless its recursion config allows it."""
    component = (ROOT / "components" / "training" / "aws" / "run_guard.py").read_text(encoding="utf-8")
    assert guard_config.MAX_ROUNDS <= guard_config.RECURSION_LIMIT_WITHOUT_ALLOW or re.search(
        r'FunctionRecursionConfig\([^)]*recursive_loop="Allow"', component, re.S
    )


# --- deleting the file system --------------------------------------------------------------------


def delete_requests(client) -> list[dict]:
    """The parameters of every DeleteFileSystem the client sends (as the service receives them)."""
    sent = []
    client.meta.events.register(
        "provide-client-params.fsx.DeleteFileSystem", lambda params, **_: sent.append(dict(params))
    )
    return sent


@pytest.mark.parametrize(
    "deployment_type, lustre_configuration",
    [
        ("SCRATCH_2", None),
        ("SCRATCH_1", None),
        ("PERSISTENT_2", {"SkipFinalBackup": True}),
        ("PERSISTENT_1", {"SkipFinalBackup": True}),
    ],
)
def test_delete_sends_skip_final_backup_only_for_persistent_file_systems(aws, deployment_type, lustre_configuration):
    run = make_run(aws, "run-a", nodes=1, deployment_type=deployment_type, export_checkpoints=False)
    fsx = aws.session.client("fsx")
    sent = delete_requests(fsx)
    [described] = actions.run_file_systems(fsx, "run-a")
    assert actions.delete_file_system(fsx, described) == "deleting"
    assert sent == [
        {
            "FileSystemId": run.file_system_id,
            "ClientRequestToken": f"mlinfra-guard-{run.file_system_id}",
            **({"LustreConfiguration": lustre_configuration} if lustre_configuration else {}),
        }
    ]
    assert file_system_state(aws, run.file_system_id) == "DELETING"


def test_the_emulator_refuses_a_lustre_configuration_on_deleting_a_scratch_file_system(aws):
    run = make_run(aws, "run-a", nodes=1)
    with pytest.raises(ClientError, match="LustreConfiguration"):
        aws.fsx.delete_file_system(FileSystemId=run.file_system_id, LustreConfiguration={})


def test_a_file_system_being_deleted_is_left_alone(aws, env, context):
    run_a = make_run(aws, "run-a")
    aws.fsx.delete_file_system(FileSystemId=run_a.file_system_id)  # teardown (or an earlier round) did
    clients = guard.Clients(ec2=aws.ec2, fsx=aws.session.client("fsx"), s3=aws.s3)
    sent = delete_requests(clients.fsx)
    result = guard.handle({"action": "expire"}, guard_config.load_config(env), clients, remaining_millis=lambda: 1_000)
    assert result["outcome"] == "compute-stopped; file system being deleted" and result["continue"] is None
    assert sent == [] and tasks(aws, run_a.file_system_id) == []


# --- transient AWS errors ------------------------------------------------------------------------


def no_retries(aws) -> guard.Clients:
    """Clients that surface every error at once (botocore's own retries would hide the injected ones)."""
    config = Config(retries={"total_max_attempts": 1, "mode": "standard"})
    return guard.Clients(
        ec2=aws.session.client("ec2", config=config), fsx=aws.session.client("fsx", config=config), s3=aws.s3
    )


def test_throttling_and_server_errors_are_waited_out(aws, env):
    run_a = make_run(aws, "run-a")
    aws.inject_faults(
        {"Action": "DescribeInstances", "Code": "RequestLimitExceeded", "Status": 503, "Count": 1},
        {"Action": "DescribeDataRepositoryTasks", "Code": "ThrottlingException", "Status": 400, "Count": 1},
        {"Action": "CreateDataRepositoryTask", "Code": "InternalServerError", "Status": 500, "Count": 1},
    )
    polls = []

    def sleep(seconds):  # after the three faults (looking earlier would meet the injected one itself)
        polls.append(seconds)
        for task in tasks(aws, run_a.file_system_id) if len(polls) >= 3 else ():
            aws.set_task(task["TaskId"], "SUCCEEDED")

    result = guard.handle(
        {"action": "expire"},
        guard_config.load_config(env),
        no_retries(aws),
        remaining_millis=lambda: 900_000,
        sleep=sleep,
    )
    assert result["outcome"] == "compute-stopped; checkpoints exported; file system deleting"
    assert [note.split(":")[:2] for note in result["transient_errors"]] == [
        ["DescribeInstances", " RequestLimitExceeded"],
        ["DescribeDataRepositoryTasks", " ThrottlingException"],
        ["CreateDataRepositoryTask", " InternalServerError"],
    ]
    assert len(polls) == 4 and billing(aws, "run-a") == []


def test_throttling_on_the_completions_first_terminate_is_retried_at_once(aws, env):
    run_a = make_run(aws, "run-a")
    put_marker(aws, "run-a", "SUCCESS")
    aws.inject_faults({"Action": "TerminateInstances", "Code": "RequestLimitExceeded", "Status": 503, "Count": 1})
    result = guard.handle(
        s3_event("runs/run-a/_SUCCESS"), guard_config.load_config(env), no_retries(aws), remaining_millis=lambda: 1_000
    )
    assert billing(aws, "run-a") == [] and sorted(result["terminated"]) == sorted(run_a.instance_ids)
    assert result["transient_errors"][0].startswith("TerminateInstances: RequestLimitExceeded")


def test_throttling_until_the_time_is_up_continues_in_a_new_round(aws, env):
    make_run(aws, "run-a")
    aws.inject_faults({"Action": "DescribeInstances", "Code": "Throttling", "Status": 400, "Count": 5})
    result = guard.handle(
        {"action": "expire"}, guard_config.load_config(env), no_retries(aws), remaining_millis=lambda: 1_000
    )
    assert result["outcome"] == "waiting; re-invoking" and result["continue"]["round"] == 1


def test_other_errors_are_reported_and_raised(aws, env):
    run_a = make_run(aws, "run-a")
    aws.inject_faults({"Action": "TerminateInstances", "Code": "UnauthorizedOperation", "Status": 403, "Count": 5})
    with pytest.raises(ClientError, match="UnauthorizedOperation"):
        guard.handle(
            {"action": "expire"}, guard_config.load_config(env), no_retries(aws), remaining_millis=lambda: 1_000
        )
    [(_, body)] = reports(aws)
    assert body["outcome"].startswith("error: ClientError") and "UnauthorizedOperation" in body["outcome"]
    assert len(billing(aws, "run-a")) == len(run_a.instance_ids)


# --- reports and configuration -----------------------------------------------------------------


def test_reports_say_what_was_done(aws, env, context):
    run_a = make_run(aws, "run-a")
    put_marker(aws, "run-a", "FAILED")
    handler(s3_event("runs/run-a/_FAILED"), context)
    handler({"action": "expire"}, context)
    (completion_key, completion), (expiry_key, expiry) = reports(aws)
    assert completion_key.endswith("-completion.json") and expiry_key.endswith("-expire.json")
    [task] = tasks(aws, run_a.file_system_id)
    report_path = f"s3://{REGISTRY}/checkpoints/run-a/_export-reports"
    assert completion == {
        "run_id": "run-a",
        "action": "completion",
        "at": completion["at"],
        "marker": "FAILED",
        "round": 0,
        "polls": 0,
        "terminated": sorted(run_a.instance_ids),
        "compute": "stopped",
        "stopped_at": completion["stopped_at"],
        "file_system": run_a.file_system_id,
        "task_ids": [task["TaskId"]],
        "export": {
            "state": "started",
            "task_id": task["TaskId"],
            "detail": f"export task {task['TaskId']} started",
            "failure_report_path": report_path,
        },
        "outcome": "waiting; re-invoking",
        "continue": {
            "action": "finish-completion",
            "round": 1,
            "started_at": completion["continue"]["started_at"],
            "stopped_at": completion["stopped_at"],
            "task_ids": [task["TaskId"]],
            "marker": "FAILED",
        },
    }
    assert expiry["terminated"] == [] and expiry["compute"] == "stopped"
    assert expiry["file_system"] == run_a.file_system_id and expiry["export"]["state"] == "running"
    assert expiry["continue"]["round"] == 1 and expiry["outcome"] == "waiting; re-invoking"
    head = aws.s3.head_object(Bucket=REGISTRY, Key=expiry_key)
    assert head["ContentType"] == "application/json" and head["ServerSideEncryption"] == "aws:kms"


def test_a_failing_step_is_reported_and_raised_so_lambda_retries(aws, env):
    run_a = make_run(aws, "run-a")
    unreachable = aws.session.client(
        "fsx", endpoint_url="http://127.0.0.1:9", config=Config(retries={"max_attempts": 1}, connect_timeout=2)
    )
    clients = guard.Clients(ec2=aws.ec2, fsx=unreachable, s3=aws.s3)
    with pytest.raises(EndpointConnectionError):
        guard.handle({"action": "expire"}, guard_config.load_config(env), clients, remaining_millis=lambda: 1_000)
    [(_, body)] = reports(aws)
    assert body["outcome"].startswith("error: EndpointConnectionError")
    assert sorted(body["terminated"]) == sorted(run_a.instance_ids) and body["compute"] == "stopped"


def test_reports_never_overwrite_each_other(aws, registry):
    moment = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
    keys = [actions.write_report(aws.s3, registry, "run-a", "expire", {"n": n}, moment) for n in range(3)]
    assert len(set(keys)) == 3
    assert [json.loads(aws.s3.get_object(Bucket=registry, Key=k)["Body"].read())["n"] for k in keys] == [0, 1, 2]


def test_a_misconfigured_guard_names_every_bad_variable(monkeypatch):
    env = {
        "MLINFRA_RUN_ID": "Run A",
        "MLINFRA_TEARDOWN_ON_COMPLETION": "yes",
        "MLINFRA_EXPORT_CHECKPOINTS": "true",
        "MLINFRA_CHECKPOINTS_PATH": "../etc",
    }
    with pytest.raises(guard_config.ConfigError, match="MLINFRA_EXPIRES_AT='2026-11-21 12:00' is invalid"):
        guard_config.load_config({**env, "MLINFRA_EXPIRES_AT": "2026-11-21 12:00"})
    with pytest.raises(guard_config.ConfigError) as error:
        guard_config.load_config(env)
    message = str(error.value)
    for expected in (
        "MLINFRA_RUN_ID='Run A' is invalid",
        "MLINFRA_REGISTRY_BUCKET is not set",
        "MLINFRA_TEARDOWN_ON_COMPLETION='yes' is invalid: 'true' or 'false'",
        "MLINFRA_CHECKPOINTS_PATH='../etc' is invalid",
        "MLINFRA_EXPIRES_AT is not set: the run's expires-at, like 2026-11-22T08:00:00Z",
    ):
        assert expected in message
    assert "MLINFRA_EXPORT_CHECKPOINTS" not in message


def test_the_guard_agrees_with_the_lifecycle_limits_and_the_run_id_pattern():
    from infra.training import limits
    from infra.training.spec import RUN_ID_PATTERN

    assert guard_config.EXPORT_POLL_SECONDS == limits.EXPORT_POLL_SECONDS
    assert guard_config.RUN_ID_PATTERN == RUN_ID_PATTERN
    assert guard_config.SAFETY_MILLIS < limits.GUARD_TIMEOUT_SECONDS * 1000 - guard_config.EXPORT_POLL_SECONDS * 1000


def test_the_guard_source_stands_alone():
    for path in (ROOT / "run_guard").glob("*.py"):
        imports = re.findall(r"^\s*(?:from|import)\s+([\w.]+)", path.read_text(encoding="utf-8"), re.M)
        assert all(
            name.split(".")[0]
            in {
                "__future__",
                "run_guard",
                "boto3",
                "botocore",
                "json",
                "os",
                "re",
                "time",
                "dataclasses",
                "datetime",
                "typing",
                "collections",
            }
            for name in imports
        ), path
