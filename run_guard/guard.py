"""The guard's flows. Both end in the same stop flow, which runs in rounds until the run costs nothing:
- a completion marker (teardownOnCompletion) of this deployment (its expires_at is the guard's
  MLINFRA_EXPIRES_AT; an earlier deployment's marker is ignored): terminate the run's instances at once, then
  stop; a _SUCCESS whose checkpoints the nodes exported ends there (the file system is teardown's, or the
  expiry's), so no export task races teardown's destroy;
- expiry (the schedule at expires-at): stop.
Only instances tagged with this deployment's expires-at are terminated.
Stop: wait until no instance is left, export the checkpoints (exportCheckpoints), delete the file
system only after that export succeeded. Throttling and server-side AWS errors are waited out.

`handle` never invokes anything itself: a result with "continue" asks the entry to re-invoke the
function asynchronously with that payload (the flow's state for its next round).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from run_guard import actions
from run_guard.config import EXPORT_POLL_SECONDS, MAX_ROUNDS, SAFETY_MILLIS, GuardConfig

MARKERS = {"_SUCCESS": "SUCCESS", "_FAILED": "FAILED"}
EXPIRE = "expire"
FINISH_COMPLETION = "finish-completion"  # the completion flow's own re-invocation
MAX_NOTED_ERRORS = 10


@dataclass(frozen=True)
class Clients:
    ec2: Any
    fsx: Any
    s3: Any


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class StopState:
    """What one stop flow carries from round to round through its own re-invocation."""

    flow: str  # "expire" or "completion" (also the report's action)
    round: int = 0
    started_at: str | None = None
    stopped_at: str | None = None  # when no instance of the run was left; exports must start after it
    task_ids: tuple[str, ...] = ()  # export tasks this flow started
    marker: str | None = None  # completion: SUCCESS or FAILED

    @classmethod
    def from_event(cls, flow: str, event: dict[str, Any]) -> StopState:
        # Fields come from our own re-invocation; anything malformed falls back to the safe default
        # (a later stopped_at only makes the export requirement stricter).
        rnd, tasks, marker = event.get("round"), event.get("task_ids"), event.get("marker")
        return cls(
            flow=flow,
            round=rnd if isinstance(rnd, int) and not isinstance(rnd, bool) and rnd >= 0 else 0,
            started_at=_valid_time(event.get("started_at")),
            stopped_at=_valid_time(event.get("stopped_at")),
            task_ids=tuple(t for t in tasks if isinstance(t, str)) if isinstance(tasks, list) else (),
            marker=marker if marker in MARKERS.values() else None,
        )

    def next_event(self) -> dict[str, Any]:
        event = {
            "action": EXPIRE if self.flow == "expire" else FINISH_COMPLETION,
            "round": self.round + 1,
            "started_at": self.started_at,
            "stopped_at": self.stopped_at,
            "task_ids": list(self.task_ids),
        }
        if self.flow == "completion":
            event["marker"] = self.marker
        return event


def classify(event: Any, config: GuardConfig) -> tuple[str, Any]:
    """("completion", state), ("expire", state) or ("ignore", reason)."""
    if not isinstance(event, dict):
        return "ignore", f"event is a {type(event).__name__}, not an object"
    if "action" in event:
        if event["action"] == EXPIRE:
            return "expire", StopState.from_event("expire", event)
        if event["action"] == FINISH_COMPLETION:
            return "completion", StopState.from_event("completion", event)
        return "ignore", f"unknown action {event['action']!r} (only {EXPIRE!r} and {FINISH_COMPLETION!r})"
    detail = event.get("detail")
    detail = detail if isinstance(detail, dict) else {}
    bucket_info, object_info = detail.get("bucket"), detail.get("object")
    bucket = bucket_info.get("name") if isinstance(bucket_info, dict) else None
    key = object_info.get("key") if isinstance(object_info, dict) else None
    if event.get("source") != "aws.s3" or event.get("detail-type") != "Object Created" or not bucket or not key:
        return "ignore", "not an S3 'Object Created' event nor an expiry"
    if bucket != config.registry_bucket:
        return "ignore", f"bucket {bucket!r} is not the registry {config.registry_bucket!r}"
    name = key[len(config.runs_prefix) :] if key.startswith(config.runs_prefix) else None
    if name not in MARKERS:
        return "ignore", f"key {key!r} is not {config.runs_prefix}_SUCCESS or _FAILED"
    return "completion", StopState("completion", marker=MARKERS[name])


def _valid_time(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if parsed.tzinfo else None


def handle(
    event: Any,
    config: GuardConfig,
    clients: Clients,
    remaining_millis: Callable[[], int],
    now: Callable[[], datetime] = utcnow,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Act on one event and write the report; the result (also the report body) says what was done."""
    kind, arg = classify(event, config)
    if kind == "ignore":
        print(f"run guard {config.run_id}: ignored: {arg}")
        return {"run_id": config.run_id, "action": "ignore", "outcome": "ignored", "reason": arg}
    report: dict[str, Any] = {"run_id": config.run_id, "action": kind, "at": iso(now())}
    try:
        if kind == "completion":
            _completion(arg, config, clients, remaining_millis, now, sleep, report)
        else:
            _stop(arg, config, clients, remaining_millis, now, sleep, report)
    except Exception as error:  # report what was done before failing; Lambda's retry repeats idempotently
        report["outcome"] = f"error: {type(error).__name__}: {error}"
        report["continue"] = None
        try:
            _write(report, config, clients, now)
        except Exception as write_error:
            print(f"run guard {config.run_id}: could not write the report: {write_error}")
        raise
    return _write(report, config, clients, now)


def _write(
    report: dict[str, Any], config: GuardConfig, clients: Clients, now: Callable[[], datetime]
) -> dict[str, Any]:
    report["report"] = actions.write_report(
        clients.s3, config.registry_bucket, config.run_id, report["action"], report, now()
    )
    print(f"run guard {config.run_id}: {report['action']}: {report['outcome']} (report {report['report']})")
    return report


def _note_transient(report: dict[str, Any], error: ClientError) -> None:
    """Record a throttling/server error that the flow waits out (the last few, to keep the report small)."""
    err = error.response.get("Error", {})
    note = f"{error.operation_name}: {err.get('Code')}: {err.get('Message', '')}".strip()
    report["transient_errors"] = (report.get("transient_errors", []) + [note])[-MAX_NOTED_ERRORS:]
    print(f"run guard {report['run_id']}: transient AWS error, will look again: {note}")


def _completion(
    state: StopState,
    config: GuardConfig,
    clients: Clients,
    remaining_millis: Callable[[], int],
    now: Callable[[], datetime],
    sleep: Callable[[float], None],
    report: dict[str, Any],
) -> None:
    report.update(marker=state.marker, terminated=[])
    exported_by_nodes = False
    if state.round == 0:
        # A marker counts only for the deployment that wrote it: one left by an earlier deployment of the same run
        # id must never stop this one's nodes.
        key = f"{config.runs_prefix}_{state.marker}"
        marker = actions.read_marker(clients.s3, config.registry_bucket, key)
        if marker is None or not actions.written_by(marker, config.expires_at):
            written = marker.get("expires_at") if marker else None
            report["outcome"] = (
                f"ignored: {key} is not this deployment's (written for expires-at {written}, "
                f"this one's is {config.expires_at})"
                if marker
                else f"ignored: {key} is gone or not a JSON object"
            )
            return
        exported_by_nodes = state.marker == "SUCCESS" and marker.get("checkpoints_exported") is True
    if not config.teardown_on_completion:
        report["outcome"] = "recorded (teardownOnCompletion is false)"
        return
    if state.round == 0:  # first of all, and at once: nothing of the run may bill any longer
        try:
            deployment = config.expires_at or None
            report["terminated"] = actions.terminate_run_instances(clients.ec2, config.run_id, deployment)
        except ClientError as error:
            if not actions.is_transient(error) or exported_by_nodes:
                raise  # a transient error raised here is retried by Lambda
            _note_transient(report, error)  # the stop flow below terminates again on its first look
    if exported_by_nodes:
        # The nodes exported the checkpoints before writing _SUCCESS: nothing is left to export, and starting an
        # export task or deleting the file system here would race `teardown`'s destroy (DeleteFileSystem fails
        # while a task is pending). The file system is teardown's, or the expiry flow's at expires-at.
        report["outcome"] = "compute-stopping; checkpoints exported by the nodes; file system left to teardown"
        return
    _stop(state, config, clients, remaining_millis, now, sleep, report)


def _stop(
    state: StopState,
    config: GuardConfig,
    clients: Clients,
    remaining_millis: Callable[[], int],
    now: Callable[[], datetime],
    sleep: Callable[[float], None],
    report: dict[str, Any],
) -> None:
    state.started_at = state.started_at or iso(now())
    report.setdefault("terminated", [])
    report.update({"round": state.round, "polls": 0, "continue": None})
    while True:
        try:
            outcome = _step(state, config, clients, now, report)
        except ClientError as error:
            if not actions.is_transient(error):
                raise
            _note_transient(report, error)
            outcome = None
        if outcome:
            break
        if remaining_millis() < EXPORT_POLL_SECONDS * 1000 + SAFETY_MILLIS:
            if state.round + 1 >= MAX_ROUNDS:
                outcome = f"gave-up after {MAX_ROUNDS} rounds; file system kept"
            else:
                outcome = "waiting; re-invoking"
                report["continue"] = state.next_event()
            break
        sleep(EXPORT_POLL_SECONDS)
        report["polls"] += 1
    report.update(outcome=outcome, stopped_at=state.stopped_at, task_ids=list(state.task_ids))


def _step(
    state: StopState, config: GuardConfig, clients: Clients, now: Callable[[], datetime], report: dict[str, Any]
) -> str | None:
    """One look at the run: the final outcome, or None to look again later."""
    deployment = config.expires_at or None  # only this deployment's instances (a later one's are not ours to stop)
    terminated = actions.terminate_run_instances(clients.ec2, config.run_id, deployment)
    report["terminated"] = sorted(set(report["terminated"]) | set(terminated))
    if actions.run_instances(clients.ec2, config.run_id, actions.NOT_GONE_STATES, deployment):
        report["compute"] = "stopping"
        return None
    report["compute"] = "stopped"
    state.stopped_at = state.stopped_at or iso(now())
    file_systems = actions.run_file_systems(clients.fsx, config.run_id)
    if not file_systems:
        return "compute-stopped; no file system left"
    live = [fs for fs in file_systems if fs.get("Lifecycle") != actions.DELETING]
    if not live:  # deleted by an earlier round or by teardown: nothing more to do, never delete twice
        report["file_system"] = ", ".join(fs["FileSystemId"] for fs in file_systems)
        report["file_system_deletion"] = "already-deleting"
        return "compute-stopped; file system being deleted"
    if len(live) > 1:
        ids = ", ".join(fs["FileSystemId"] for fs in live)
        return f"error: {len(live)} file systems carry the run's tag ({ids}); none deleted"
    file_system = live[0]
    report["file_system"] = file_system["FileSystemId"]
    if not config.export_checkpoints:
        report["file_system_deletion"] = actions.delete_file_system(clients.fsx, file_system)
        if report["file_system_deletion"] == "waiting-for-task":
            return None
        return "compute-stopped; file system deleting (exportCheckpoints is false)"
    since = datetime.fromisoformat(state.stopped_at.replace("Z", "+00:00"))
    step = actions.export_step(clients.fsx, file_system, config.run_id, config.checkpoints_path, since, state.task_ids)
    report["export"] = {"state": step.state, "task_id": step.task_id, "detail": step.detail}
    if step.report_path:
        report["export"]["failure_report_path"] = step.report_path
    if step.state == "started" and step.task_id:
        state.task_ids += (step.task_id,)
    if step.state in ("succeeded", "nothing-linked"):
        report["file_system_deletion"] = actions.delete_file_system(clients.fsx, file_system)
        if report["file_system_deletion"] == "waiting-for-task":
            return None
        if step.state == "nothing-linked":
            return "compute-stopped; nothing linked to export through; file system deleting"
        return "compute-stopped; checkpoints exported; file system deleting"
    if step.state == "failed":
        return f"export-failed; file system kept: {step.detail}"
    return None
