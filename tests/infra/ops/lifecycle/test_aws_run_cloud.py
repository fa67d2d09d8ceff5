"""AwsRunCloud (the boto3 RunCloud) against the moto server, reached through AWS_ENDPOINT_URL."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from infra.ops.lifecycle.aws.cloud import AwsRunCloud
from infra.ops.lifecycle.ports import ExportStatus, Marker, StoppedCompute
from run_guard import actions
from run_guard.config import MAX_EXPORT_ATTEMPTS
from tests.infra.ops.lifecycle.aws_world import (
    REGION,
    REGISTRY,
    export_task,
    file_system_state,
    instance_states,
    make_run,
)


@pytest.fixture
def cloud(aws) -> AwsRunCloud:
    return AwsRunCloud(REGION)  # no session given: it must find the emulator through the environment


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def utc_now() -> datetime:
    return datetime.now(UTC)


def marker_body(status: str, **fields) -> bytes:
    body = {
        "run_id": "run-a",
        "status": status,
        "exit_code": 0,
        "checkpoints_exported": True,
        "started_at": "2026-11-21T08:00:00Z",
        "ended_at": "2026-11-21T10:00:00Z",
        "node_count": 2,
        "rank": 0,
        "host": "10.0.0.4",
        **fields,
    }
    return json.dumps(body).encode()


def guard_task(aws, fs_id: str, run_id: str = "run-a", tagged: bool = True) -> str:
    return export_task(aws, fs_id, run_id, tagged)


def test_marker(aws, registry, cloud):
    assert cloud.marker(REGISTRY, "run-a") is None
    aws.s3.put_object(
        Bucket=REGISTRY, Key="runs/run-a/_FAILED", Body=marker_body("FAILED", exit_code=3, checkpoints_exported=False)
    )
    failed = cloud.marker(REGISTRY, "run-a")
    assert (failed.status, failed.exit_code, failed.checkpoints_exported, failed.ended_at) == (
        "FAILED",
        3,
        False,
        "2026-11-21T10:00:00Z",
    )
    assert failed.body["host"] == "10.0.0.4"
    aws.s3.put_object(Bucket=REGISTRY, Key="runs/run-a/_SUCCESS", Body=marker_body("SUCCESS"))
    assert cloud.marker(REGISTRY, "run-a").status == "SUCCESS"
    assert cloud.marker(REGISTRY, "run-b") is None


def test_an_unreadable_marker_still_counts(aws, registry, cloud):
    aws.s3.put_object(Bucket=REGISTRY, Key="runs/run-a/_SUCCESS", Body=b"\xff not json")
    assert cloud.marker(REGISTRY, "run-a") == Marker("SUCCESS")


# --- compute -----------------------------------------------------------------------------------


def test_active_nodes_and_stop_compute_touch_only_the_run(aws, cloud):
    run_a, run_b = make_run(aws, "run-a", nodes=3, lustre=False), make_run(aws, "run-b", nodes=2, lustre=False)
    assert cloud.active_nodes("run-a") == 3
    before = utc_now().replace(microsecond=0)
    stopped = cloud.stop_compute("run-a")
    assert isinstance(stopped, StoppedCompute) and sorted(stopped.instance_ids) == sorted(run_a.instance_ids)
    moment = datetime.fromisoformat(stopped.stopped_at.replace("Z", "+00:00"))
    assert before <= moment <= utc_now() and stopped.stopped_at.endswith("Z"), "EC2's clock, in ISO UTC"
    assert cloud.active_nodes("run-a") == 0
    assert cloud.stop_compute("run-a") == StoppedCompute((), stopped.stopped_at), "again: same stop time, nothing new"
    assert set(instance_states(aws, run_b.instance_ids).values()) == {"running"}


def test_stop_compute_without_any_instance_cannot_say_when(aws, cloud):
    assert cloud.stop_compute("run-a") == StoppedCompute((), None)


@pytest.mark.parametrize(
    "reason, expected",
    [
        ("User initiated (2019-12-05 16:45:41 GMT)", datetime(2019, 12, 5, 16, 45, 41, tzinfo=UTC)),  # EC2
        ("User initiated (2026-11-21 10:00:02 UTC)", datetime(2026, 11, 21, 10, 0, 2, tzinfo=UTC)),  # moto
        ("", None),
        (None, None),
        ("Server.SpotInstanceTermination", None),
    ],
)
def test_when_ec2_says_an_instance_stopped(reason, expected):
    assert actions.transition_time(reason) == expected


# --- export ------------------------------------------------------------------------------------


def test_export_checkpoints_steps(aws, cloud):
    assert cloud.export_checkpoints("run-a").state == "no-filesystem"
    run = make_run(aws, "run-a")
    since = iso(utc_now())
    started = cloud.export_checkpoints("run-a", since)
    assert started.state == "started" and started.task_id
    assert cloud.export_checkpoints("run-a", since) == ExportStatus(
        "running", f"export task {started.task_id} is PENDING", started.task_id
    )
    aws.set_task(started.task_id, "SUCCEEDED")
    assert cloud.export_checkpoints("run-a", since).state == "succeeded"
    assert file_system_state(aws, run.file_system_id) == "AVAILABLE", "the adapter never deletes"


def test_the_export_asks_for_a_failed_files_report_inside_the_checkpoints_repository(aws, cloud):
    run = make_run(aws, "run-a")
    started = cloud.export_checkpoints("run-a", iso(utc_now()))
    [task] = aws.fsx.describe_data_repository_tasks(TaskIds=[started.task_id])["DataRepositoryTasks"]
    assert task["Report"] == {
        "Enabled": True,
        "Path": f"s3://{REGISTRY}/checkpoints/run-a/_export-reports",
        "Format": "REPORT_CSV_20191124",
        "Scope": "FAILED_FILES_ONLY",
    }
    assert (task["Paths"], task["FileSystemId"]) == (["checkpoints"], run.file_system_id)


def test_without_a_checkpoints_repository_the_export_runs_without_a_report(aws, cloud):
    make_run(aws, "run-a", export_checkpoints=False)  # only datasets/ is linked
    started = cloud.export_checkpoints("run-a", iso(utc_now()))
    [task] = aws.fsx.describe_data_repository_tasks(TaskIds=[started.task_id])["DataRepositoryTasks"]
    assert task["Report"] == {"Enabled": False}


def test_a_task_started_by_this_object_counts_whatever_the_clocks_say(aws, cloud):
    make_run(aws, "run-a")
    ahead = iso(utc_now() + timedelta(hours=1))  # the local clock runs an hour ahead of AWS's
    started = cloud.export_checkpoints("run-a", ahead)
    aws.set_task(started.task_id, "SUCCEEDED")
    assert cloud.export_checkpoints("run-a", ahead) == ExportStatus(
        "succeeded", f"export task {started.task_id} succeeded", started.task_id
    )
    assert len(aws.fsx.describe_data_repository_tasks()["DataRepositoryTasks"]) == 1, "never a second export"


def test_a_run_tagged_export_after_compute_stopped_counts_and_others_do_not(aws, cloud):
    run = make_run(aws, "run-a")
    early = guard_task(aws, run.file_system_id)
    aws.set_task(early, "SUCCEEDED")
    since = iso(utc_now())  # the emulator shares this machine's clock
    started = cloud.export_checkpoints("run-a", since)
    assert started.state == "started", "an export from before compute stopped does not count"
    aws.set_task(started.task_id, "FAILED", "S3 slow down")
    untagged = guard_task(aws, run.file_system_id, tagged=False)
    aws.set_task(untagged, "SUCCEEDED")
    assert AwsRunCloud(REGION).export_checkpoints("run-a", since).state == "started", "untagged: not the run's"
    for task in aws.fsx.describe_data_repository_tasks()["DataRepositoryTasks"]:
        if task["Lifecycle"] == "PENDING":
            aws.set_task(task["TaskId"], "CANCELED")
    by_guard = guard_task(aws, run.file_system_id)
    aws.set_task(by_guard, "SUCCEEDED")
    assert AwsRunCloud(REGION).export_checkpoints("run-a", since) == ExportStatus(
        "succeeded", f"export task {by_guard} succeeded", by_guard
    )


def test_any_running_task_of_the_file_system_is_waited_for(aws, cloud):
    run = make_run(aws, "run-a")
    other = aws.fsx.create_data_repository_task(
        Type="IMPORT_METADATA_FROM_REPOSITORY", FileSystemId=run.file_system_id, Report={"Enabled": False}
    )["DataRepositoryTask"]["TaskId"]
    aws.set_task(other, "EXECUTING")
    status = cloud.export_checkpoints("run-a", iso(utc_now()))
    assert status == ExportStatus(
        "running", f"data repository (IMPORT_METADATA_FROM_REPOSITORY) task {other} is EXECUTING", other
    )
    assert len(aws.fsx.describe_data_repository_tasks()["DataRepositoryTasks"]) == 1


def test_export_checkpoints_gives_up_after_repeated_failures(aws, cloud):
    make_run(aws, "run-a")
    for _attempt in range(MAX_EXPORT_ATTEMPTS):
        status = cloud.export_checkpoints("run-a")
        assert status.state == "started"
        aws.set_task(status.task_id, "FAILED", "path checkpoints does not exist")
    failed = cloud.export_checkpoints("run-a")
    assert failed.state == "failed" and "path checkpoints does not exist" in failed.detail
    assert f"failed files: s3://{REGISTRY}/checkpoints/run-a/_export-reports/" in failed.detail


def test_a_file_system_being_deleted_is_not_gone(aws, cloud):
    run = make_run(aws, "run-a")
    aws.fsx.delete_file_system(FileSystemId=run.file_system_id)
    assert cloud.export_checkpoints("run-a") == ExportStatus(
        "deleting", f"file system {run.file_system_id} is being deleted"
    )
    aws.set_file_system(run.file_system_id, "DELETED")
    assert cloud.export_checkpoints("run-a").state == "no-filesystem"


def test_the_stacks_file_system_is_looked_up_when_no_tag_matches(aws):
    run = make_run(aws, "run-a")
    arn = aws.fsx.describe_file_systems(FileSystemIds=[run.file_system_id])["FileSystems"][0]["ResourceARN"]
    aws.fsx.untag_resource(ResourceARN=arn, TagKeys=["mlinfra:run-id"])  # a tag lost or never applied
    assert AwsRunCloud(REGION).export_checkpoints("run-a").state == "no-filesystem"
    knowing = AwsRunCloud(REGION, file_system_ids=[run.file_system_id, "fs-0123456789abcdef0"])
    started = knowing.export_checkpoints("run-a")
    assert started.state == "started"
    aws.set_task(started.task_id, "SUCCEEDED")
    assert knowing.export_checkpoints("run-a").state == "succeeded"
    aws.fsx.delete_file_system(FileSystemId=run.file_system_id)
    assert knowing.export_checkpoints("run-a").state == "deleting"
    aws.set_file_system(run.file_system_id, "DELETED")
    gone = knowing.export_checkpoints("run-a")  # nobody recorded an export before the deletion
    assert gone.state == "missing" and run.file_system_id in gone.detail and f"region {REGION}" in gone.detail


def test_a_named_file_system_is_gone_only_when_a_guard_report_shows_its_export(aws, registry):
    run = make_run(aws, "run-a")
    aws.fsx.delete_file_system(FileSystemId=run.file_system_id)
    aws.set_file_system(run.file_system_id, "DELETED")
    cloud = AwsRunCloud(REGION)
    cloud.expect_file_systems([run.file_system_id], REGISTRY)
    assert cloud.export_checkpoints("run-a").state == "missing"
    report = {"file_system": run.file_system_id, "export": {"state": "running", "task_id": "task-1"}}
    aws.s3.put_object(Bucket=REGISTRY, Key="runs/run-a/guard/20260301T100000.000000Z-expire.json",
                      Body=json.dumps(report))  # fmt: skip
    assert cloud.export_checkpoints("run-a").state == "missing"  # an export that had not succeeded
    report = {**report, "export": {"state": "succeeded", "task_id": "task-2"}, "file_system_deletion": "deleting"}
    aws.s3.put_object(Bucket=REGISTRY, Key="runs/run-a/guard/20260301T100500.000000Z-expire.json",
                      Body=json.dumps(report))  # fmt: skip
    gone = cloud.export_checkpoints("run-a")
    assert gone.state == "no-filesystem"
    assert gone.detail == f"{run.file_system_id} deleted by the run guard after export task task-2 succeeded"


def test_a_bad_since_is_a_clear_error(aws, cloud):
    make_run(aws, "run-a")
    with pytest.raises(ValueError, match="not an ISO-8601 UTC time"):
        cloud.export_checkpoints("run-a", "yesterday")


def test_audit_is_the_audit_module(aws, cloud):
    run = make_run(aws, "run-a", nodes=1, lustre=False)
    assert any(run.instance_ids[0] in left.identifier for left in cloud.audit("run-a"))


def test_automatic_export_is_turned_off_before_the_export_task_and_waited_for(aws, cloud):
    """FSx runs no export task while the association has automatic export on (DeleteFileSystem API)."""
    make_run(aws, "run-a")
    (checkpoints,) = [
        a
        for a in aws.fsx.describe_data_repository_associations()["Associations"]
        if a["FileSystemPath"] == "/checkpoints"
    ]
    assert checkpoints["S3"]["AutoExportPolicy"]["Events"] == ["NEW", "CHANGED"]
    aws.set_association(checkpoints["AssociationId"], "UPDATING")  # FSx still applying an earlier change
    waiting = cloud.export_checkpoints("run-a", iso(utc_now()))
    assert (waiting.state, waiting.detail) == ("running", f"association {checkpoints['AssociationId']} is UPDATING")
    assert aws.fsx.describe_data_repository_tasks()["DataRepositoryTasks"] == []
    aws.set_association(checkpoints["AssociationId"], "AVAILABLE")
    started = cloud.export_checkpoints("run-a", iso(utc_now()))
    assert started.state == "started"
    after = aws.fsx.describe_data_repository_associations(AssociationIds=[checkpoints["AssociationId"]])
    assert after["Associations"][0]["S3"]["AutoExportPolicy"]["Events"] == []
    datasets = [
        a for a in aws.fsx.describe_data_repository_associations()["Associations"] if a["FileSystemPath"] == "/datasets"
    ][0]
    assert datasets["S3"] == {"AutoImportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]}}  # left alone


def test_a_run_id_is_claimed_once_and_the_first_claim_holds(aws, registry, cloud):
    """A conditional create (If-None-Match: *), so two stacks starting under one run id never both win."""
    first = {"stack": "mlinfra/training-a", "claimed_at": "2026-03-01T09:00:00Z"}
    assert cloud.claim(REGISTRY, "run-a", first) == first
    second = {"stack": "mlinfra/training-b", "claimed_at": "2026-03-01T09:05:00Z"}
    assert cloud.claim(REGISTRY, "run-a", second) == first
    stored = json.loads(aws.s3.get_object(Bucket=REGISTRY, Key="runs/run-a/_CLAIM")["Body"].read())
    assert stored == first


def test_a_pending_repository_task_or_a_deletion_keeps_the_file_system_busy(aws, cloud):
    """The race `run` lost: the guard's export task is pending when the destroy deletes the file system, and FSx
    refuses that with BadRequest; file_system_busy says so, so teardown waits instead."""
    run = make_run(aws, "run-a")
    assert cloud.file_system_busy("run-a") is None
    task = export_task(aws, run.file_system_id)
    assert cloud.file_system_busy("run-a") == (
        f"data repository task {task} (EXPORT_TO_REPOSITORY) is PENDING on file system {run.file_system_id}"
    )
    with pytest.raises(Exception, match="BadRequest"):  # what the destroy met
        aws.fsx.delete_file_system(FileSystemId=run.file_system_id)
    aws.set_task(task, "SUCCEEDED")
    assert cloud.file_system_busy("run-a") is None
    aws.fsx.delete_file_system(FileSystemId=run.file_system_id)
    assert cloud.file_system_busy("run-a") == f"file system {run.file_system_id} is being deleted"
    aws.set_file_system(run.file_system_id, "DELETED")
    assert cloud.file_system_busy("run-a") is None


def test_a_file_system_never_linked_has_nothing_to_export(aws, cloud):
    """The launcher died while FSx created the file system: no association was made, FSx refuses any export task
    ("not linked to a data repository"), so nothing can be exported and nothing was: the export step says so
    instead of failing every time (the file system would then bill for ever)."""
    run = make_run(aws, "run-a", linked=False)
    status = cloud.export_checkpoints("run-a", iso(utc_now()))
    assert status.state == "nothing-linked" and status.task_id is None
    assert run.file_system_id in status.detail and "nothing to export" in status.detail
    assert aws.fsx.describe_data_repository_tasks()["DataRepositoryTasks"] == []
    assert file_system_state(aws, run.file_system_id) == "AVAILABLE", "the adapter never deletes"


def test_associations_that_cannot_be_read_are_not_taken_for_none(aws, cloud):
    """Unreadable associations (no permission) are no proof that nothing is linked: the export is tried as before,
    and nothing is deleted on a guess."""
    make_run(aws, "run-a")
    # the first read (the linkage check) refused; the export then goes on as for any linked file system
    aws.inject_faults({"Action": "DescribeDataRepositoryAssociations", "Code": "AccessDeniedException", "Status": 400,
                       "Count": 1})  # fmt: skip
    status = cloud.export_checkpoints("run-a", iso(utc_now()))
    assert status.state == "started" and status.task_id
