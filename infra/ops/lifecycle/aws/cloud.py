"""`RunCloud` on AWS with boto3. Compute and export reuse the run guard's own steps (run_guard.actions),
so the CLI and the guard Lambda act alike. boto3 honours AWS_ENDPOINT_URL, so an emulator works too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import boto3
from botocore.exceptions import ClientError

from infra.ops.lifecycle import audit as audit_module
from infra.ops.lifecycle.ports import (
    ComputeStillRunning,
    ExportStatus,
    Leftover,
    Marker,
    StoppedCompute,
    claim_key,
    iso_precise,
    parse_marker,
)
from run_guard import actions

MISSING = ("NoSuchKey", "404", "NotFound")
STOP_WAIT_SECONDS = 600  # EC2 terminates in a minute or two; longer means something is wrong
STOP_POLL_SECONDS = 5


class AwsRunCloud:
    """`file_system_ids`: the run's file systems as the stack knows them (its outputs); looked up
    directly when no file system carries the run's tag, so a tag or region mismatch cannot make an
    export look unnecessary."""

    def __init__(
        self,
        region: str | None,
        session: Any = None,
        checkpoints_path: str = "checkpoints",
        sleep: Callable[[float], None] = time.sleep,
        file_system_ids: Sequence[str] = (),
    ):
        self.session: Any = session or boto3.session.Session(region_name=region)
        self.region = self.session.region_name or "(the default region)"
        self.reports_bucket: str | None = None
        self.sleep = sleep
        self.checkpoints_path = checkpoints_path
        self.file_system_ids = tuple(file_system_ids)
        self._clients: dict[str, Any] = {}
        self._own_tasks: set[str] = set()  # export tasks this object started: they count whatever the clocks say

    def _client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self.session.client(service)
        return self._clients[service]

    def marker(self, bucket: str, run_id: str) -> Marker | None:
        """runs/<run-id>/_SUCCESS, else _FAILED, else None."""
        for status in ("SUCCESS", "FAILED"):
            try:
                body = self._client("s3").get_object(Bucket=bucket, Key=f"runs/{run_id}/_{status}")["Body"].read()
            except ClientError as error:
                if error.response["Error"]["Code"] in MISSING:
                    continue
                raise
            return parse_marker(status, body)
        return None

    def claim(self, bucket: str, run_id: str, claim: dict[str, str]) -> dict[str, Any]:
        s3, key = self._client("s3"), claim_key(run_id)
        try:  # encryption: the registry bucket's default (SSE-KMS with its key)
            s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(claim).encode(), IfNoneMatch="*")
            return claim
        except ClientError as error:
            if error.response["Error"]["Code"] not in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise
        held = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        return held if isinstance(held, dict) else {}

    def active_nodes(self, run_id: str) -> int:
        return len(actions.run_instances(self._client("ec2"), run_id, actions.BILLING_STATES))

    def stop_compute(self, run_id: str) -> StoppedCompute:
        """Terminate the run's instances and return once none is left, not even shutting down, so an
        export started afterwards sees every write; with when the last one stopped, by EC2's clock."""
        ec2 = self._client("ec2")
        ids = actions.terminate_run_instances(ec2, run_id)
        deadline = time.monotonic() + STOP_WAIT_SECONDS
        while actions.run_instances(ec2, run_id, actions.NOT_GONE_STATES):
            if time.monotonic() >= deadline:
                raise ComputeStillRunning(
                    f"instances of run {run_id} still not terminated {STOP_WAIT_SECONDS} s after their termination "
                    "was asked; nothing else was changed"
                )
            self.sleep(STOP_POLL_SECONDS)
        stopped = actions.last_stopped_at(ec2, run_id)
        return StoppedCompute(tuple(ids), iso_precise(stopped) if stopped else None)

    def export_checkpoints(self, run_id: str, since: str | None = None) -> ExportStatus:
        fsx = self._client("fsx")
        file_systems = actions.run_file_systems(fsx, run_id) or actions.file_systems_by_id(fsx, self.file_system_ids)
        if not file_systems and self.file_system_ids:
            return self._gone(run_id)
        if not file_systems:
            return ExportStatus("no-filesystem", f"no file system carries the tag mlinfra:run-id={run_id}")
        live = [fs for fs in file_systems if fs.get("Lifecycle") != actions.DELETING]
        if not live:
            ids = ", ".join(fs["FileSystemId"] for fs in file_systems)
            return ExportStatus("deleting", f"file system {ids} is being deleted")
        if len(live) > 1:
            ids = ", ".join(fs["FileSystemId"] for fs in live)
            return ExportStatus("failed", f"{len(live)} file systems carry the run's tag: {ids}")
        step = actions.export_step(fsx, live[0], run_id, self.checkpoints_path, _parse_since(since), self._own_tasks)
        if step.state == "started" and step.task_id:
            self._own_tasks.add(step.task_id)
        return ExportStatus(step.state, step.detail, step.task_id)  # a failure's detail names its report

    def file_system_busy(self, run_id: str) -> str | None:
        """FSx refuses DeleteFileSystem (BadRequest, which a destroy does not retry) while a data repository task
        of the file system is pending or running, and a file system being deleted is not deleted again."""
        fsx = self._client("fsx")
        file_systems = actions.run_file_systems(fsx, run_id) or actions.file_systems_by_id(fsx, self.file_system_ids)
        for fs in file_systems:
            if fs.get("Lifecycle") == actions.DELETING:
                return f"file system {fs['FileSystemId']} is being deleted"
            running = actions.running_tasks(fsx, fs["FileSystemId"])
            if running:
                task = running[-1]
                return (
                    f"data repository task {task['TaskId']} ({task['Type']}) is {task['Lifecycle']} on file system "
                    f"{fs['FileSystemId']}"
                )
        return None

    def expect_file_systems(self, file_system_ids: Sequence[str], bucket: str | None = None) -> None:
        self.file_system_ids = tuple(dict.fromkeys((*self.file_system_ids, *file_system_ids)))
        self.reports_bucket = bucket or self.reports_bucket

    def _gone(self, run_id: str) -> ExportStatus:
        """The file systems the stack names are not found here: deleted by the run guard after an export it saw
        succeed (its reports under runs/<run-id>/guard/ say so), else "missing"."""
        ids = ", ".join(self.file_system_ids)
        exported = self._guard_exported_and_deleted(run_id)
        if all(fs_id in exported for fs_id in self.file_system_ids):
            tasks = ", ".join(sorted({exported[fs_id] for fs_id in self.file_system_ids}))
            return ExportStatus("no-filesystem", f"{ids} deleted by the run guard after export task {tasks} succeeded")
        return ExportStatus(
            "missing",
            f"file system {ids}, named by the stack's outputs, is not found in region {self.region} and no run "
            "guard report shows it was exported before it was deleted",
        )

    def _guard_exported_and_deleted(self, run_id: str) -> dict[str, str]:
        """file system id -> export task id, from the guard's reports that exported it and then deleted it."""
        if not self.reports_bucket:
            return {}
        s3, found = self._client("s3"), {}
        for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.reports_bucket, Prefix=f"runs/{run_id}/guard/"
        ):
            for item in page.get("Contents", []):
                body = json.loads(s3.get_object(Bucket=self.reports_bucket, Key=item["Key"])["Body"].read())
                export = body.get("export") if isinstance(body, dict) else None
                if (
                    isinstance(export, dict)
                    and export.get("state") == "succeeded"
                    and body.get("file_system_deletion") in ("deleting", "already-deleting", "already-deleted")
                    and isinstance(body.get("file_system"), str)
                ):
                    found[body["file_system"]] = str(export.get("task_id") or "(unnamed)")
        return found

    def audit(self, run_id: str) -> list[Leftover]:
        return audit_module.audit(run_id, self.session)


def _parse_since(since: str | None) -> datetime | None:
    if since is None:
        return None
    try:
        moment = datetime.fromisoformat(since.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"since={since!r} is not an ISO-8601 UTC time like 2026-01-31T12:00:00Z") from None
    if moment.tzinfo is None:
        raise ValueError(f"since={since!r} has no time zone; use UTC like 2026-01-31T12:00:00Z")
    return moment
