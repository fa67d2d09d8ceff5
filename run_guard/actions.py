"""The guard's boto3 steps, each idempotent and scoped to one run's tag; clients are passed in so the
`infra` CLI reuses the same steps with its own session.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from botocore.exceptions import ClientError, ParamValidationError

from run_guard.config import MAX_EXPORT_ATTEMPTS

RUN_TAG = "mlinfra:run-id"
EXPIRES_TAG = "mlinfra:expires-at"  # names the deployment: a run id deployed again gets a new one
TERMINABLE_STATES = ("pending", "running", "stopping", "stopped")
NOT_GONE_STATES = TERMINABLE_STATES + ("shutting-down",)
BILLING_STATES = ("pending", "running")
EXPORT = "EXPORT_TO_REPOSITORY"
RUNNING_TASK = ("PENDING", "EXECUTING", "CANCELING")
ENDED_BADLY = ("FAILED", "CANCELED")
DELETING = "DELETING"
REPORT_DIR = "_export-reports"  # FSx writes failed-file reports under <checkpoints repository>/_export-reports/

# Errors worth waiting out: throttling and the services' own failures (any 5xx is one too).
TRANSIENT_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "SlowDown",
        "EC2ThrottledException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "Unavailable",
        "InternalError",
        "InternalFailure",
        "InternalServerError",
        "InternalServiceError",
        "InternalServiceException",
    }
)


def is_transient(error: BaseException) -> bool:
    """Whether `error` is a throttling or server-side AWS error that a later attempt may not meet."""
    if not isinstance(error, ClientError):
        return False
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
    return error.response.get("Error", {}).get("Code") in TRANSIENT_CODES or status >= 500


def tag_dict(tags: Iterable[dict[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for t in tags or ()}


# --- compute -----------------------------------------------------------------------------------


def _run_instances(
    ec2: Any, run_id: str, states: tuple[str, ...], expires_at: str | None = None
) -> list[dict[str, Any]]:
    wanted = {RUN_TAG: run_id, **({EXPIRES_TAG: expires_at} if expires_at else {})}
    filters = [{"Name": f"tag:{key}", "Values": [value]} for key, value in wanted.items()]
    filters.append({"Name": "instance-state-name", "Values": list(states)})
    found: dict[str, dict[str, Any]] = {}
    for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
        for reservation in page["Reservations"]:
            for instance in reservation["Instances"]:
                tags = tag_dict(instance.get("Tags"))
                if all(tags.get(key) == value for key, value in wanted.items()) and instance["State"]["Name"] in states:
                    found[instance["InstanceId"]] = instance
    return [found[key] for key in sorted(found)]


def run_instances(
    ec2: Any, run_id: str, states: Iterable[str] = TERMINABLE_STATES, expires_at: str | None = None
) -> list[str]:
    """Ids of the instances tagged with `run_id` (and, given, with the deployment's `expires_at`) in `states`
    (the tags are checked again client-side)."""
    return [i["InstanceId"] for i in _run_instances(ec2, run_id, tuple(states), expires_at)]


def terminate_run_instances(ec2: Any, run_id: str, expires_at: str | None = None) -> list[str]:
    """Terminate every instance of the run (of the deployment with `expires_at`, when given) that is not already
    shutting down; the ids asked to terminate."""
    ids = run_instances(ec2, run_id, TERMINABLE_STATES, expires_at)
    for start in range(0, len(ids), 500):
        ec2.terminate_instances(InstanceIds=ids[start : start + 500])
    return ids


def read_marker(s3: Any, bucket: str, key: str) -> dict[str, Any] | None:
    """The completion marker's JSON body (as the node bootstrap writes it); None when it is gone or not an object."""
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
            return None
        raise
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def written_by(marker: dict[str, Any], expires_at: str) -> bool:
    """Whether the deployment whose expires-at is `expires_at` (ISO UTC, its tag) wrote `marker`: the bootstrap
    writes its expires-at as Unix time; a marker without one (older nodes) or another's is not this one's."""
    written = marker.get("expires_at")
    if not isinstance(written, int) or isinstance(written, bool) or not expires_at:
        return False
    try:
        moment = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
    except ValueError:
        return False
    return int(moment.timestamp()) == written


# EC2's StateTransitionReason of a stopped or terminated instance: "User initiated (2019-12-05 16:45:41 GMT)".
_TRANSITION_TIME = re.compile(r"\((\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}) (?:GMT|UTC)\)")


def transition_time(reason: str | None) -> datetime | None:
    """When EC2 says an instance changed state, from its StateTransitionReason; None when it does not say."""
    match = _TRANSITION_TIME.search(reason or "")
    if not match:
        return None
    return datetime.fromisoformat(f"{match[1]}T{match[2]}+00:00")


def last_stopped_at(ec2: Any, run_id: str) -> datetime | None:
    """When the last of the run's terminated instances stopped, by EC2's clock (the time EC2 records in
    StateTransitionReason: when the termination began). None when no terminated instance is visible or
    one of them carries no time (then nobody can say when the last write happened)."""
    moments = [transition_time(i.get("StateTransitionReason")) for i in _run_instances(ec2, run_id, ("terminated",))]
    if not moments or any(moment is None for moment in moments):
        return None
    return max(moments)  # type: ignore[type-var]


# --- file system -------------------------------------------------------------------------------


def run_file_systems(fsx: Any, run_id: str) -> list[dict[str, Any]]:
    """The run's FSx file systems in any state, DELETING included (DescribeFileSystems stops listing a
    file system once it is deleted)."""
    found = []
    for page in fsx.get_paginator("describe_file_systems").paginate():
        for fs in page["FileSystems"]:
            if tag_dict(fs.get("Tags")).get(RUN_TAG) == run_id and fs.get("Lifecycle") != "DELETED":
                found.append(fs)
    return found


def file_systems_by_id(fsx: Any, file_system_ids: Iterable[str]) -> list[dict[str, Any]]:
    """The given file systems that still exist, whatever their tags say (one call each: a deleted one
    fails the whole call with FileSystemNotFound)."""
    found = []
    for fs_id in dict.fromkeys(file_system_ids):
        try:
            found += fsx.describe_file_systems(FileSystemIds=[fs_id])["FileSystems"]
        except ClientError as error:
            if error.response["Error"]["Code"] != "FileSystemNotFound":
                raise
    return [fs for fs in found if fs.get("Lifecycle") != "DELETED"]


def deployment_type(file_system: dict[str, Any]) -> str:
    return (file_system.get("LustreConfiguration") or {}).get("DeploymentType", "")


def delete_file_system(fsx: Any, file_system: dict[str, Any]) -> str:
    """Delete with no final backup (the data is exported first): 'deleting', 'already-deleting',
    'already-deleted', or 'waiting-for-task' (FSx refuses while a data repository task is pending or
    running). SkipFinalBackup only for PERSISTENT_* file systems: FSx rejects any LustreConfiguration
    on deleting a SCRATCH_1/SCRATCH_2 one (which never takes a final backup)."""
    fs_id = file_system["FileSystemId"]
    if file_system.get("Lifecycle") == DELETING:
        return "already-deleting"
    if running_tasks(fsx, fs_id):
        return "waiting-for-task"
    request: dict[str, Any] = {"FileSystemId": fs_id, "ClientRequestToken": f"mlinfra-guard-{fs_id}"}
    if deployment_type(file_system).startswith("PERSISTENT"):
        request["LustreConfiguration"] = {"SkipFinalBackup": True}
    try:
        fsx.delete_file_system(**request)
    except ClientError as error:
        if error.response["Error"]["Code"] == "FileSystemNotFound":
            return "already-deleted"
        raise
    return "deleting"


# --- checkpoint export -------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportStep:
    # "nothing-linked": no data repository is linked to the file system at all (its association was never made:
    # the launching machine died while FSx created it), so nothing can have been exported through it and no export
    # can run; deleting it loses nothing the registry was ever meant to hold.
    state: Literal["started", "running", "succeeded", "failed", "nothing-linked"]
    task_id: str | None
    detail: str
    report_path: str | None = None  # where FSx writes the failed files of the task (task-<id>/failures.csv)


def repository_tasks(fsx: Any, file_system_id: str) -> list[dict[str, Any]]:
    """Every data repository task of the file system (any type), oldest first."""
    tasks, token = [], None
    while True:  # botocore has no paginator for this operation
        page = fsx.describe_data_repository_tasks(
            Filters=[{"Name": "file-system-id", "Values": [file_system_id]}], **({"NextToken": token} if token else {})
        )
        tasks += page["DataRepositoryTasks"]
        token = page.get("NextToken")
        if not token:
            return sorted(tasks, key=lambda t: t["CreationTime"])


def export_tasks(fsx: Any, file_system_id: str) -> list[dict[str, Any]]:
    """The file system's export tasks, oldest first."""
    return [t for t in repository_tasks(fsx, file_system_id) if t["Type"] == EXPORT]


def running_tasks(fsx: Any, file_system_id: str) -> list[dict[str, Any]]:
    return [t for t in repository_tasks(fsx, file_system_id) if t["Lifecycle"] in RUNNING_TASK]


def _covers(task_paths: list[str] | None, path: str) -> bool:
    """Whether a task exporting `task_paths` (none: the whole file system) exports `path`."""
    if not task_paths:
        return True
    path = path.strip("/")
    return any(path == p.strip("/") or path.startswith(p.strip("/") + "/") or not p.strip("/") for p in task_paths)


def associations(fsx: Any, file_system_id: str) -> list[dict[str, Any]] | None:
    """The file system's data repository associations; None when they cannot be read (a file system type without
    associations, or no permission). Transient errors are raised, to be waited out."""
    try:
        page = fsx.describe_data_repository_associations(
            Filters=[{"Name": "file-system-id", "Values": [file_system_id]}]
        )
    except ClientError as error:
        if is_transient(error):
            raise
        return None
    found: list[dict[str, Any]] = page.get("Associations", [])
    return found


def linked_associations(fsx: Any, file_system_id: str, path: str) -> list[dict[str, Any]]:
    """The data repository associations through which an export of `path` goes ([] when none, or when
    they cannot be read)."""
    wanted = "/" + path.strip("/")
    return [
        a
        for a in associations(fsx, file_system_id) or []
        if wanted == "/" + a.get("FileSystemPath", "").strip("/")
        or wanted.startswith("/" + a.get("FileSystemPath", "").strip("/").rstrip("/") + "/")
    ]


def never_linked(fsx: Any, file_system: dict[str, Any]) -> str | None:
    """Why nothing can be exported from the file system (no data repository association, no file-system-level
    import/export path), or None: linked, or unknown (the associations could not be read: then an export is
    tried, as before, and nothing is deleted on a guess)."""
    fs_id = file_system["FileSystemId"]
    legacy = (file_system.get("LustreConfiguration") or {}).get("DataRepositoryConfiguration") or {}
    if legacy.get("ExportPath") or legacy.get("ImportPath") or associations(fsx, fs_id) != []:
        return None
    return f"file system {fs_id} has no data repository linked (no association, no export path): nothing to export"


def report_path(fsx: Any, file_system: dict[str, Any], path: str) -> str | None:
    """Where FSx may write an export's failure report: inside the data repository linked to `path`
    (FSx requires the report path within a linked repository). None when no repository links it; the
    export then runs without a report."""
    for association in linked_associations(fsx, file_system["FileSystemId"], path):
        repository = association.get("DataRepositoryPath", "")
        if repository.startswith("s3://"):
            return f"{repository.rstrip('/')}/{REPORT_DIR}"
    legacy = ((file_system.get("LustreConfiguration") or {}).get("DataRepositoryConfiguration") or {}).get("ExportPath")
    return f"{legacy.rstrip('/')}/{REPORT_DIR}" if legacy and legacy.startswith("s3://") else None


def stop_automatic_export(fsx: Any, file_system_id: str, path: str) -> str | None:
    """FSx runs no export task while automatic export is on for the association it goes through
    (DeleteFileSystem API: "disable automatic export before executing the export data repository
    task"). Turns it off; a description of what to wait for, or None when the task may start. Turning
    it off loses nothing: an export task exports everything changed since the last export."""
    links = linked_associations(fsx, file_system_id, path)
    busy = [a for a in links if a.get("Lifecycle", "AVAILABLE") != "AVAILABLE"]
    if busy:
        return f"association {busy[0]['AssociationId']} is {busy[0]['Lifecycle']}"
    exporting = [a for a in links if ((a.get("S3") or {}).get("AutoExportPolicy") or {}).get("Events")]
    for association in exporting:
        s3 = {key: value for key, value in (association.get("S3") or {}).items() if key == "AutoImportPolicy"}
        fsx.update_data_repository_association(
            AssociationId=association["AssociationId"], S3={**s3, "AutoExportPolicy": {"Events": []}}
        )
    if not exporting:
        return None
    ids = ", ".join(a["AssociationId"] for a in exporting)
    # FSx applies the change asynchronously (the association is UPDATING meanwhile): look again.
    links = linked_associations(fsx, file_system_id, path)
    if any(
        a.get("Lifecycle", "AVAILABLE") != "AVAILABLE"
        or ((a.get("S3") or {}).get("AutoExportPolicy") or {}).get("Events")
        for a in links
    ):
        return f"turned off automatic export on {ids}; the final export task starts once FSx has applied it"
    return None


def _task_report(task: dict[str, Any]) -> str | None:
    report = task.get("Report") or {}
    return report.get("Path") if report.get("Enabled") else None


def export_step(
    fsx: Any,
    file_system: dict[str, Any],
    run_id: str,
    path: str,
    since: datetime | None,
    own_task_ids: Iterable[str] = (),
    max_attempts: int = MAX_EXPORT_ATTEMPTS,
) -> ExportStep:
    """One idempotent step of exporting `path` to the file system's data repositories.

    Waits while any data repository task of the file system is pending or running (FSx runs one at a
    time). Only export tasks that count decide the rest: those this caller started (`own_task_ids`,
    immune to clock skew) and those carrying the run's tag created at/after `since` (when compute had
    stopped; None: only own tasks count). Reports success, gives up after `max_attempts` failed tasks,
    else starts a task (with a failed-files report when a linked repository can hold it).
    """
    fs_id, own = file_system["FileSystemId"], set(own_task_ids)
    tasks = repository_tasks(fsx, fs_id)
    running = [t for t in tasks if t["Lifecycle"] in RUNNING_TASK]
    if running:
        task = running[-1]
        return ExportStep("running", task["TaskId"], f"{_kind(task)} task {task['TaskId']} is {task['Lifecycle']}")

    def counts(task: dict[str, Any]) -> bool:
        if task["Type"] != EXPORT or not _covers(task.get("Paths"), path):
            return False
        if task["TaskId"] in own:
            return True
        return since is not None and task["CreationTime"] >= since and tag_dict(task.get("Tags")).get(RUN_TAG) == run_id

    counted = [t for t in tasks if counts(t)]
    succeeded = [t for t in counted if t["Lifecycle"] == "SUCCEEDED"]
    if succeeded:
        task = succeeded[-1]
        return ExportStep("succeeded", task["TaskId"], f"export task {task['TaskId']} succeeded")
    failed = [t for t in counted if t["Lifecycle"] in ENDED_BADLY]
    last_failure, last_report = "", None
    if failed:
        task = failed[-1]
        reason = (task.get("FailureDetails") or {}).get("Message") or "no reason given"
        last_report = _task_report(task)
        last_failure = f"export task {task['TaskId']} {task['Lifecycle']}: {reason}" + (
            f" (failed files: {last_report}/)" if last_report else ""
        )
        if len(failed) >= max_attempts:
            return ExportStep(
                "failed", task["TaskId"], f"{len(failed)} export attempts failed; last: {last_failure}", last_report
            )
    unlinked = never_linked(fsx, file_system)
    if unlinked:
        return ExportStep("nothing-linked", None, unlinked)
    waiting = stop_automatic_export(fsx, fs_id, path)
    if waiting:
        return ExportStep("running", None, waiting)
    report = report_path(fsx, file_system, path)
    settings: dict[str, Any] = (
        {"Enabled": True, "Path": report, "Format": "REPORT_CSV_20191124", "Scope": "FAILED_FILES_ONLY"}
        if report
        else {"Enabled": False}
    )
    try:
        created = fsx.create_data_repository_task(
            Type=EXPORT,
            FileSystemId=fs_id,
            Paths=[path.strip("/")],
            Report=settings,
            Tags=[{"Key": RUN_TAG, "Value": run_id}],
        )["DataRepositoryTask"]
    except ClientError as error:
        if error.response["Error"]["Code"] == "DataRepositoryTaskExecuting":  # another caller just started one
            return ExportStep("running", None, "another data repository task is executing")
        raise
    detail = f"export task {created['TaskId']} started" + (f" (retry after {last_failure})" if last_failure else "")
    return ExportStep("started", created["TaskId"], detail, report)


def _kind(task: dict[str, Any]) -> str:
    return "export" if task["Type"] == EXPORT else f"data repository ({task['Type']})"


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
            s3.put_object(**put)  # the microsecond key is then the only guard against overwriting
            return key
        except ClientError as error:
            if error.response["Error"]["Code"] not in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise
    raise RuntimeError(f"could not find a free report key under runs/{run_id}/guard/")
