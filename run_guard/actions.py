"""The guard's boto3 steps, each idempotent and scoped to one run's tag; clients are passed in so the
`infra` CLI reuses the same steps with its own session.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Iterable, Literal, Optional

from botocore.exceptions import ClientError, ParamValidationError

from run_guard.config import MAX_EXPORT_ATTEMPTS

RUN_TAG = "mlinfra:run-id"
TERMINABLE_STATES = ("pending", "running", "stopping", "stopped")
NOT_GONE_STATES = TERMINABLE_STATES + ("shutting-down",)
BILLING_STATES = ("pending", "running")
EXPORT = "EXPORT_TO_REPOSITORY"
RUNNING_TASK = ("PENDING", "EXECUTING", "CANCELING")
ENDED_BADLY = ("FAILED", "CANCELED")


def tag_dict(tags: Optional[Iterable[dict[str, str]]]) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for t in tags or ()}


# --- compute -----------------------------------------------------------------------------------

def run_instances(ec2: Any, run_id: str, states: Iterable[str] = TERMINABLE_STATES) -> list[str]:
    """Ids of the instances tagged with `run_id` in `states` (the tag is checked again client-side)."""
    states = tuple(states)
    filters = [{"Name": f"tag:{RUN_TAG}", "Values": [run_id]},
               {"Name": "instance-state-name", "Values": list(states)}]
    found: set[str] = set()
    for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
        for reservation in page["Reservations"]:
            for instance in reservation["Instances"]:
                if tag_dict(instance.get("Tags")).get(RUN_TAG) == run_id and instance["State"]["Name"] in states:
                    found.add(instance["InstanceId"])
    return sorted(found)


def terminate_run_instances(ec2: Any, run_id: str) -> list[str]:
    """Terminate every instance of the run that is not already shutting down; the ids asked to terminate."""
    ids = run_instances(ec2, run_id, TERMINABLE_STATES)
    for start in range(0, len(ids), 500):
        ec2.terminate_instances(InstanceIds=ids[start:start + 500])
    return ids


# --- file system -------------------------------------------------------------------------------

def run_file_systems(fsx: Any, run_id: str) -> list[dict[str, Any]]:
    """The run's FSx file systems that are not already being deleted."""
    found = []
    for page in fsx.get_paginator("describe_file_systems").paginate():
        for fs in page["FileSystems"]:
            if tag_dict(fs.get("Tags")).get(RUN_TAG) == run_id and fs.get("Lifecycle") != "DELETING":
                found.append(fs)
    return found


def delete_file_system(fsx: Any, file_system_id: str) -> str:
    """Delete with no final backup (the data is exported first); 'deleting' or 'already-deleted'."""
    try:
        fsx.delete_file_system(FileSystemId=file_system_id, ClientRequestToken=f"mlinfra-guard-{file_system_id}",
                               LustreConfiguration={"SkipFinalBackup": True})
    except ClientError as error:
        if error.response["Error"]["Code"] == "FileSystemNotFound":
            return "already-deleted"
        raise
    return "deleting"


# --- checkpoint export -------------------------------------------------------------------------

@dataclass(frozen=True)
class ExportStep:
    state: Literal["started", "running", "succeeded", "failed"]
    task_id: Optional[str]
    detail: str


def export_tasks(fsx: Any, file_system_id: str) -> list[dict[str, Any]]:
    """The file system's export tasks, oldest first."""
    tasks, token = [], None
    while True:  # botocore has no paginator for this operation
        page = fsx.describe_data_repository_tasks(Filters=[{"Name": "file-system-id", "Values": [file_system_id]}],
                                                  **({"NextToken": token} if token else {}))
        tasks += [t for t in page["DataRepositoryTasks"] if t["Type"] == EXPORT]
        token = page.get("NextToken")
        if not token:
            return sorted(tasks, key=lambda t: t["CreationTime"])


def _covers(task_paths: Optional[list[str]], path: str) -> bool:
    """Whether a task exporting `task_paths` (none: the whole file system) exports `path`."""
    if not task_paths:
        return True
    path = path.strip("/")
    return any(path == p.strip("/") or path.startswith(p.strip("/") + "/") or not p.strip("/") for p in task_paths)


def export_step(fsx: Any, file_system_id: str, run_id: str, path: str, since: Optional[datetime],
                own_task_ids: Iterable[str] = (), max_attempts: int = MAX_EXPORT_ATTEMPTS) -> ExportStep:
    """One idempotent step of exporting `path` to the file system's data repositories.

    Only tasks that count are considered: created at/after `since` (when compute had stopped) or by
    this guard (`own_task_ids`, immune to clock skew). Waits for any running task (FSx runs one at a
    time), reports success, gives up after `max_attempts` failed tasks, else starts a task.
    """
    own = set(own_task_ids)
    tasks = export_tasks(fsx, file_system_id)
    running = [t for t in tasks if t["Lifecycle"] in RUNNING_TASK]
    if running:
        task = running[-1]
        return ExportStep("running", task["TaskId"], f"export task {task['TaskId']} is {task['Lifecycle']}")
    counted = [t for t in tasks if _covers(t.get("Paths"), path)
               and (since is None or t["TaskId"] in own or t["CreationTime"] >= since)]
    succeeded = [t for t in counted if t["Lifecycle"] == "SUCCEEDED"]
    if succeeded:
        task = succeeded[-1]
        return ExportStep("succeeded", task["TaskId"], f"export task {task['TaskId']} succeeded")
    failed = [t for t in counted if t["Lifecycle"] in ENDED_BADLY]
    last_failure = ""
    if failed:
        task = failed[-1]
        reason = (task.get("FailureDetails") or {}).get("Message") or "no reason given"
        last_failure = f"export task {task['TaskId']} {task['Lifecycle']}: {reason}"
        if len(failed) >= max_attempts:
            return ExportStep("failed", task["TaskId"], f"{len(failed)} export attempts failed; last: {last_failure}")
    try:
        created = fsx.create_data_repository_task(
            Type=EXPORT, FileSystemId=file_system_id, Paths=[path.strip("/")], Report={"Enabled": False},
            Tags=[{"Key": RUN_TAG, "Value": run_id}])["DataRepositoryTask"]
    except ClientError as error:
        if error.response["Error"]["Code"] == "DataRepositoryTaskExecuting":  # another caller just started one
            return ExportStep("running", None, "another data repository task is executing")
        raise
    detail = f"export task {created['TaskId']} started" + (f" (retry after {last_failure})" if last_failure else "")
    return ExportStep("started", created["TaskId"], detail)


# --- reports -----------------------------------------------------------------------------------

def write_report(s3: Any, bucket: str, run_id: str, action: str, body: dict[str, Any], now: datetime) -> str:
    """Write `body` as a new object runs/<run-id>/guard/<UTC timestamp>-<action>.json; never overwrites
    (If-None-Match), no SSE parameters (the bucket's default encryption applies). Returns the key."""
    data = json.dumps(body, indent=2, sort_keys=True, default=str).encode()
    for attempt in range(5):
        stamp = (now + timedelta(microseconds=attempt)).strftime("%Y%m%dT%H%M%S.%fZ")
        key = f"runs/{run_id}/guard/{stamp}-{action}.json"
        put = {"Bucket": bucket, "Key": key, "Body": data, "ContentType": "application/json"}
        try:
            s3.put_object(**put, IfNoneMatch="*")
            return key
        except ParamValidationError:  # a Lambda runtime's bundled botocore older than S3 conditional writes
            s3.put_object(**put)      # the microsecond key is then the only guard against overwriting
            return key
        except ClientError as error:
            if error.response["Error"]["Code"] not in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise
    raise RuntimeError(f"could not find a free report key under runs/{run_id}/guard/")
