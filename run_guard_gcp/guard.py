"""What the GCP guard does with one event: one short, idempotent step of stopping the run, decided afresh from
the cloud and the guard's own records each time (no invocation waits for another: Eventarc's Pub/Sub
subscriptions redeliver a message that is not acknowledged within their deadline, so a long poll would run twice).

Events: the completion marker (runs/<run-id>/_SUCCESS or _FAILED, from the bucket's notification) and a tick from
the Cloud Scheduler job, every minute. Nothing happens before expires-at unless the marker is there (and
teardownOnCompletion is true); from then on every event takes the next step, until the run costs nothing:
1. delete every node labelled with the run, and wait (the next ticks) until none is listed;
2. record when no node was left (stopped.json): an export must start after it to see every write;
3. unless the nodes copied the checkpoints themselves (this deployment's _SUCCESS says so) or exportCheckpoints
   is false, export /checkpoints with Managed Lustre's exportData (export.json names the operation), wait while
   any transfer of the file system runs, and on success
4. delete the Managed Lustre instance. A failed export keeps it. done.json records the end; later events no-op.

Records and reports are new objects under runs/<run-id>/guard/ only; the guard never changes or deletes another
object of the bucket.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from run_guard_gcp import compute, lustre
from run_guard_gcp.api import GcpApi, GcpApiError
from run_guard_gcp.config import EXPORT_MAX_SECONDS, GuardConfig

MARKERS = {"_SUCCESS": "SUCCESS", "_FAILED": "FAILED"}
TICK_ATTRIBUTE = ("mlinfra-guard", "tick")  # the Cloud Scheduler job's message attribute
STOPPED, EXPORT, DONE = "stopped.json", "export.json", "done.json"


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def classify(data: Any, config: GuardConfig) -> tuple[str, str]:
    """("marker" | "tick" | "ignore", why) for a Pub/Sub CloudEvent's data ({"message": {"attributes", "data",
    "publishTime", ...}, "subscription"})."""
    message = data.get("message") if isinstance(data, dict) else None
    if not isinstance(message, dict):
        return "ignore", "not a Pub/Sub message"
    raw = message.get("attributes")
    attributes: dict[str, Any] = raw if isinstance(raw, dict) else {}
    if attributes.get(TICK_ATTRIBUTE[0]) == TICK_ATTRIBUTE[1]:
        return "tick", "the scheduler's tick"
    name, bucket = str(attributes.get("objectId", "")), attributes.get("bucketId")
    if attributes.get("eventType") != "OBJECT_FINALIZE" or bucket is None:
        return "ignore", "neither a tick nor a Cloud Storage OBJECT_FINALIZE notification"
    if bucket != config.data_bucket:
        return "ignore", f"bucket {bucket!r} is not the run's data bucket {config.data_bucket!r}"
    marker = name[len(config.runs_prefix) :] if name.startswith(config.runs_prefix) else None
    if marker not in MARKERS:
        return "ignore", f"object {name!r} is not {config.runs_prefix}_SUCCESS or _FAILED"
    return "marker", f"{name} was written"


def published_at(data: Any) -> datetime | None:
    message = data.get("message") if isinstance(data, dict) else None
    return lustre.parse_time(message.get("publishTime")) if isinstance(message, dict) else None


class Records:
    """The guard's objects under runs/<run-id>/guard/: create-once records read back by name (no listing needed),
    and timestamped reports."""

    def __init__(self, api: GcpApi, config: GuardConfig):
        self.api, self.bucket, self.prefix = api, config.data_bucket, config.reports_prefix

    def read(self, name: str) -> dict[str, Any] | None:
        body = self.api.object_media(self.bucket, self.prefix + name)
        if body is None:
            return None
        try:
            value = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return {"unreadable": True}
        return value if isinstance(value, dict) else {"unreadable": True}

    def create(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Write `body` under `name` unless the object exists; the record that holds afterwards."""
        held = self.read(name)
        if held is not None:
            return held
        data = json.dumps(body, indent=2, sort_keys=True, default=str).encode()
        if self.api.create_object(self.bucket, self.prefix + name, data):
            return dict(body)
        return self.read(name) or dict(body)  # another invocation wrote it first

    def report(self, body: Mapping[str, Any], at: datetime) -> str:
        name = f"{at.strftime('%Y%m%dT%H%M%S.%fZ')}-{body.get('action', 'guard')}.json"
        self.create(name, body)
        return self.prefix + name


def read_marker(api: GcpApi, config: GuardConfig) -> tuple[str, dict[str, Any]] | None:
    """(SUCCESS | FAILED, body) of the run's marker; an unreadable body still counts as the marker."""
    for name, status in MARKERS.items():
        body = api.object_media(config.data_bucket, config.runs_prefix + name)
        if body is not None:
            try:
                value = json.loads(body)
            except (ValueError, UnicodeDecodeError):
                value = {}
            return status, value if isinstance(value, dict) else {}
    return None


def handle(data: Any, config: GuardConfig, api: GcpApi, now: Callable[[], datetime] = utcnow) -> dict[str, Any]:
    """Act on one event; the result says what was done (and is the report when one is written)."""
    kind, why = classify(data, config)
    base = {"run_id": config.run_id, "trigger": kind}
    if kind == "ignore":
        return {**base, "action": "ignore", "outcome": f"ignored: {why}"}
    records, at = Records(api, config), now()
    done = records.read(DONE)
    if done is not None:
        return {**base, "action": "none", "outcome": f"nothing to do: done earlier ({done.get('outcome')})"}
    marker = read_marker(api, config)
    expired = at >= config.expires_at
    if not expired and (marker is None or not config.teardown_on_completion):
        waiting = "no completion marker" if marker is None else "teardownOnCompletion is false"
        return {**base, "action": "none", "outcome": f"waiting: {waiting}, expires-at {iso(config.expires_at)}"}
    report: dict[str, Any] = {
        **base,
        "action": "expire" if expired else "completion",
        "at": iso(at),
        "marker": marker[0] if marker else None,
    }
    if _step(config, api, records, marker, at, report):
        report["report"] = records.report(report, at)
    return report


def _step(
    config: GuardConfig,
    api: GcpApi,
    records: Records,
    marker: tuple[str, dict[str, Any]] | None,
    at: datetime,
    report: dict[str, Any],
) -> bool:
    """One step; True when it changed something (then a report is written)."""
    nodes = compute.run_nodes(api, config.project, config.run_label)
    if nodes:
        asked = [i["name"] for zone, i in nodes if compute.delete_node(api, config.project, zone, i["name"])]
        report.update(compute="stopping", deleted=asked, outcome=f"{len(nodes)} node(s) of the run being deleted")
        return bool(asked)
    report["compute"] = "stopped"
    since = str(records.create(STOPPED, {"at": iso(at), "action": report["action"]}).get("at") or iso(at))
    report["stopped_at"] = since
    found = lustre.find_instances(api, config.project, config.run_label, config.instance_id, [config.lustre_instance])
    live = [fs for fs in found if fs.get("state") != "DELETING"]
    if not found or not live:
        what = "no file system left" if not found else "file system being deleted"
        return _finish(records, report, f"compute stopped; {what}")
    if len(live) > 1:
        names = ", ".join(fs["name"] for fs in live)
        return _finish(records, report, f"error: {len(live)} file systems belong to the run ({names}); none deleted")
    instance, state = live[0]["name"], live[0].get("state")
    report["file_system"] = instance
    if state == "CREATING":  # it never became ACTIVE, so no node ever wrote to it
        return _delete(api, records, report, instance, "file system never became ACTIVE (nothing written)")
    if state != "ACTIVE":
        report["outcome"] = f"{instance} is {state}: Managed Lustre exports only from an ACTIVE instance; waiting"
        return False
    if not config.export_checkpoints:
        return _delete(api, records, report, instance, "exportCheckpoints is false")
    if _copied_by_nodes(marker, config):
        return _delete(api, records, report, instance, "the nodes copied the checkpoints (this deployment's _SUCCESS)")
    return _export(config, api, records, at, since, instance, report)


def _copied_by_nodes(marker: tuple[str, dict[str, Any]] | None, config: GuardConfig) -> bool:
    """This deployment's _SUCCESS says the nodes copied /fsx/checkpoints (as teardown reads it: a marker of an
    earlier deployment of the run id, or one that does not say, is not this one's)."""
    if marker is None or marker[0] != "SUCCESS" or marker[1].get("checkpoints_exported") is not True:
        return False
    written_for = marker[1].get("expires_at")
    return isinstance(written_for, int) and written_for == int(config.expires_at.timestamp())


def _export(
    config: GuardConfig,
    api: GcpApi,
    records: Records,
    at: datetime,
    since: str,
    instance: str,
    report: dict[str, Any],
) -> bool:
    started = records.read(EXPORT)
    own = [started["operation"]] if started and isinstance(started.get("operation"), str) else []
    decision = lustre.decide_export(
        lustre.transfers(api, instance, own), config.destination, lustre.parse_time(since), own
    )
    report["export"] = {"state": decision.state, "operation": decision.operation, "detail": decision.detail}
    if decision.state == "succeeded":
        return _delete(api, records, report, instance, "checkpoints exported")
    if decision.state == "failed":
        return _finish(records, report, f"export failed; file system kept: {decision.detail}")
    if decision.state == "running":
        begun = lustre.parse_time(started.get("started_at")) if started else None
        if begun and decision.operation in own and at - begun > timedelta(seconds=EXPORT_MAX_SECONDS):
            return _finish(records, report, f"export still running after {EXPORT_MAX_SECONDS} s; file system kept")
        report["outcome"] = decision.detail
        return False
    try:
        operation = lustre.start_export(api, instance, config.destination, since)
    except GcpApiError as error:
        if error.status != 409:  # ABORTED: another caller's transfer just started; look again at the next tick
            raise
        report["outcome"] = f"another transfer of {instance} started first: {error.message}"
        return False
    records.create(EXPORT, {"operation": operation["name"], "since": since, "started_at": iso(at)})
    report["export"] = {"state": "started", "operation": operation["name"], "detail": f"to {config.destination}"}
    report["outcome"] = f"export of {lustre.CHECKPOINTS_PATH} to {config.destination} started"
    return True


def _delete(api: GcpApi, records: Records, report: dict[str, Any], instance: str, why: str) -> bool:
    report["file_system_deletion"] = lustre.delete_instance(api, instance)
    return _finish(records, report, f"compute stopped; {why}; file system {report['file_system_deletion']}")


def _finish(records: Records, report: dict[str, Any], outcome: str) -> bool:
    report["outcome"] = outcome
    records.create(DONE, report)
    return True
