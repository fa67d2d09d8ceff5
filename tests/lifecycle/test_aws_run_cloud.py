"""AwsRunCloud (the boto3 RunCloud) against the moto server, reached through AWS_ENDPOINT_URL."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from infra.lifecycle.aws_cloud import AwsRunCloud
from infra.lifecycle.ports import ExportStatus, Marker
from run_guard.config import MAX_EXPORT_ATTEMPTS
from tests.lifecycle.aws_world import REGION, REGISTRY, instance_states, make_run


@pytest.fixture
def cloud(aws) -> AwsRunCloud:
    return AwsRunCloud(REGION)  # no session given: it must find the emulator through the environment


def marker_body(status: str, **fields) -> bytes:
    body = {"run_id": "run-a", "status": status, "exit_code": 0, "checkpoints_exported": True,
            "started_at": "2026-11-21T08:00:00Z", "ended_at": "2026-11-21T10:00:00Z", "node_count": 2, "rank": 0,
            "host": "10.0.0.4", **fields}
    return json.dumps(body).encode()


def test_marker(aws, registry, cloud):
    assert cloud.marker(REGISTRY, "run-a") is None
    aws.s3.put_object(Bucket=REGISTRY, Key="runs/run-a/_FAILED", Body=marker_body("FAILED", exit_code=3,
                                                                                    checkpoints_exported=False))
    failed = cloud.marker(REGISTRY, "run-a")
    assert (failed.status, failed.exit_code, failed.checkpoints_exported, failed.ended_at) == \
        ("FAILED", 3, False, "2026-11-21T10:00:00Z")
    assert failed.body["host"] == "10.0.0.4"
    aws.s3.put_object(Bucket=REGISTRY, Key="runs/run-a/_SUCCESS", Body=marker_body("SUCCESS"))
    assert cloud.marker(REGISTRY, "run-a").status == "SUCCESS"
    assert cloud.marker(REGISTRY, "run-b") is None


def test_an_unreadable_marker_still_counts(aws, registry, cloud):
    aws.s3.put_object(Bucket=REGISTRY, Key="runs/run-a/_SUCCESS", Body=b"\xff not json")
    assert cloud.marker(REGISTRY, "run-a") == Marker("SUCCESS")


def test_active_nodes_and_stop_compute_touch_only_the_run(aws, cloud):
    run_a, run_b = make_run(aws, "run-a", nodes=3, lustre=False), make_run(aws, "run-b", nodes=2, lustre=False)
    assert cloud.active_nodes("run-a") == 3
    assert sorted(cloud.stop_compute("run-a")) == sorted(run_a.instance_ids)
    assert cloud.active_nodes("run-a") == 0 and cloud.stop_compute("run-a") == []
    assert set(instance_states(aws, run_b.instance_ids).values()) == {"running"}


def test_export_checkpoints_steps(aws, cloud):
    assert cloud.export_checkpoints("run-a").state == "no-filesystem"
    run = make_run(aws, "run-a", lustre=True)
    since = datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
    started = cloud.export_checkpoints("run-a", since)
    assert started.state == "started" and started.task_id
    assert cloud.export_checkpoints("run-a", since) == \
        ExportStatus("running", f"export task {started.task_id} is PENDING", started.task_id)
    aws.set_task(started.task_id, "SUCCEEDED")
    assert cloud.export_checkpoints("run-a", since).state == "succeeded"
    later = (datetime.now(timezone.utc) + timedelta(minutes=5)).isoformat()
    assert cloud.export_checkpoints("run-a", later).state == "started", "an export from before `since` does not count"
    assert len(aws.fsx.describe_data_repository_tasks()["DataRepositoryTasks"]) == 2
    assert run.file_system_id in {fs["FileSystemId"] for fs in aws.fsx.describe_file_systems()["FileSystems"]}


def test_export_checkpoints_gives_up_after_repeated_failures(aws, cloud):
    make_run(aws, "run-a", lustre=True)
    for attempt in range(MAX_EXPORT_ATTEMPTS):
        status = cloud.export_checkpoints("run-a")
        assert status.state == "started"
        aws.set_task(status.task_id, "FAILED", "path checkpoints does not exist")
    failed = cloud.export_checkpoints("run-a")
    assert failed.state == "failed" and "path checkpoints does not exist" in failed.detail


def test_a_bad_since_is_a_clear_error(aws, cloud):
    make_run(aws, "run-a", lustre=True)
    with pytest.raises(ValueError, match="not an ISO-8601 UTC time"):
        cloud.export_checkpoints("run-a", "yesterday")


def test_audit_is_the_audit_module(aws, cloud):
    run = make_run(aws, "run-a", nodes=1, lustre=False)
    assert any(run.instance_ids[0] in left.identifier for left in cloud.audit("run-a"))
