"""The guard's two flows: a completion marker (terminate compute at once) and expiry (terminate,
export the checkpoints, delete the file system only after a successful export), plus the report.

`handle` never invokes anything itself: a result with "continue" asks the entry to re-invoke the
function asynchronously with that payload (the expiry's state for its next round).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from run_guard import actions
from run_guard.config import EXPORT_POLL_SECONDS, MAX_ROUNDS, SAFETY_MILLIS, GuardConfig

MARKERS = {"_SUCCESS": "SUCCESS", "_FAILED": "FAILED"}


@dataclass(frozen=True)
class Clients:
    ec2: Any
    fsx: Any
    s3: Any


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def classify(event: Any, config: GuardConfig) -> tuple[str, Any]:
    """("completion", status), ("expire", state) or ("ignore", reason)."""
    if not isinstance(event, dict):
        return "ignore", f"event is a {type(event).__name__}, not an object"
    if "action" in event:
        if event["action"] == "expire":
            return "expire", ExpiryState.from_event(event)
        return "ignore", f"unknown action {event['action']!r} (only 'expire')"
    detail = event.get("detail") if isinstance(event.get("detail"), dict) else {}
    bucket = (detail.get("bucket") or {}).get("name") if isinstance(detail.get("bucket"), dict) else None
    key = (detail.get("object") or {}).get("key") if isinstance(detail.get("object"), dict) else None
    if event.get("source") != "aws.s3" or event.get("detail-type") != "Object Created" or not bucket or not key:
        return "ignore", "not an S3 'Object Created' event nor an expiry"
    if bucket != config.registry_bucket:
        return "ignore", f"bucket {bucket!r} is not the registry {config.registry_bucket!r}"
    name = key[len(config.runs_prefix):] if key.startswith(config.runs_prefix) else None
    if name not in MARKERS:
        return "ignore", f"key {key!r} is not {config.runs_prefix}_SUCCESS or _FAILED"
    return "completion", MARKERS[name]


@dataclass
class ExpiryState:
    """What one expiry carries from round to round through its own re-invocation."""
    round: int = 0
    started_at: Optional[str] = None
    stopped_at: Optional[str] = None   # when no instance of the run was left; exports must start after it
    task_ids: tuple[str, ...] = ()     # export tasks this guard started

    @classmethod
    def from_event(cls, event: dict[str, Any]) -> "ExpiryState":
        # Fields come from our own re-invocation; anything malformed falls back to the safe default
        # (a later stopped_at only makes the export requirement stricter).
        rnd = event.get("round")
        tasks = event.get("task_ids")
        return cls(round=rnd if isinstance(rnd, int) and rnd >= 0 else 0,
                   started_at=_valid_time(event.get("started_at")), stopped_at=_valid_time(event.get("stopped_at")),
                   task_ids=tuple(t for t in tasks if isinstance(t, str)) if isinstance(tasks, list) else ())

    def next_event(self) -> dict[str, Any]:
        return {"action": "expire", "round": self.round + 1, "started_at": self.started_at,
                "stopped_at": self.stopped_at, "task_ids": list(self.task_ids)}


def _valid_time(value: Any) -> Optional[str]:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if parsed.tzinfo else None


def handle(event: Any, config: GuardConfig, clients: Clients, remaining_millis: Callable[[], int],
           now: Callable[[], datetime] = utcnow, sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """Act on one event and write the report; the result (also the report body) says what was done."""
    kind, arg = classify(event, config)
    if kind == "ignore":
        print(f"run guard {config.run_id}: ignored: {arg}")
        return {"run_id": config.run_id, "action": "ignore", "outcome": "ignored", "reason": arg}
    report: dict[str, Any] = {"run_id": config.run_id, "action": kind, "at": iso(now())}
    try:
        if kind == "completion":
            _completion(arg, config, clients, report)
        else:
            _expiry(arg, config, clients, remaining_millis, now, sleep, report)
    except Exception as error:  # report what was done before failing; Lambda's retry repeats idempotently
        report["outcome"] = f"error: {type(error).__name__}: {error}"
        report["continue"] = None
        try:
            _write(report, config, clients, now)
        except Exception as write_error:  # noqa: BLE001 the original error matters more
            print(f"run guard {config.run_id}: could not write the report: {write_error}")
        raise
    return _write(report, config, clients, now)


def _write(report: dict[str, Any], config: GuardConfig, clients: Clients, now: Callable[[], datetime]) -> dict[str, Any]:
    report["report"] = actions.write_report(clients.s3, config.registry_bucket, config.run_id, report["action"],
                                            report, now())
    print(f"run guard {config.run_id}: {report['action']}: {report['outcome']} (report {report['report']})")
    return report


def _completion(status: str, config: GuardConfig, clients: Clients, report: dict[str, Any]) -> None:
    report.update(marker=status, terminated=[])
    if not config.teardown_on_completion:
        report["outcome"] = "recorded (teardownOnCompletion is false)"
        return
    report["terminated"] = actions.terminate_run_instances(clients.ec2, config.run_id)
    report["outcome"] = "compute-terminating" if report["terminated"] else "no-running-compute"


def _expiry(state: ExpiryState, config: GuardConfig, clients: Clients, remaining_millis: Callable[[], int],
            now: Callable[[], datetime], sleep: Callable[[float], None], report: dict[str, Any]) -> None:
    state.started_at = state.started_at or iso(now())
    report.update({"round": state.round, "terminated": [], "polls": 0, "continue": None})
    while True:
        outcome = _expiry_step(state, config, clients, now, report)
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


def _expiry_step(state: ExpiryState, config: GuardConfig, clients: Clients, now: Callable[[], datetime],
                 report: dict[str, Any]) -> Optional[str]:
    """One look at the run: the final outcome, or None to look again later."""
    terminated = actions.terminate_run_instances(clients.ec2, config.run_id)
    report["terminated"] = sorted(set(report["terminated"]) | set(terminated))
    if actions.run_instances(clients.ec2, config.run_id, actions.NOT_GONE_STATES):
        report["compute"] = "stopping"
        return None
    report["compute"] = "stopped"
    state.stopped_at = state.stopped_at or iso(now())
    file_systems = actions.run_file_systems(clients.fsx, config.run_id)
    if not file_systems:
        return "compute-stopped; no file system left"
    if len(file_systems) > 1:
        ids = ", ".join(fs["FileSystemId"] for fs in file_systems)
        return f"error: {len(file_systems)} file systems carry the run's tag ({ids}); none deleted"
    fs_id = file_systems[0]["FileSystemId"]
    report["file_system"] = fs_id
    if not config.export_checkpoints:
        report["file_system_deletion"] = actions.delete_file_system(clients.fsx, fs_id)
        return "compute-stopped; file system deleted (exportCheckpoints is false)"
    since = datetime.fromisoformat(state.stopped_at.replace("Z", "+00:00"))
    step = actions.export_step(clients.fsx, fs_id, config.run_id, config.checkpoints_path, since, state.task_ids)
    report["export"] = {"state": step.state, "task_id": step.task_id, "detail": step.detail}
    if step.state == "started" and step.task_id:
        state.task_ids += (step.task_id,)
    if step.state == "succeeded":
        report["file_system_deletion"] = actions.delete_file_system(clients.fsx, fs_id)
        return "compute-stopped; checkpoints exported; file system deleted"
    if step.state == "failed":
        return f"export-failed; file system kept: {step.detail}"
    return None
