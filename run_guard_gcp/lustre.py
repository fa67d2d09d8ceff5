"""Managed Lustre for one run, over the REST API: finding the run's instance, reading its data transfers, deciding
whether /checkpoints has been exported to the run's place in its data bucket, starting that export, deleting the
instance. The lifecycle's GCP adapter (infra/ops/lifecycle/gcp/cloud.py) and the guard both decide with these, so
`teardown` and the guard count the same exports.

An export counts only when it copied exactly /checkpoints to the run's destination with no file failed, and was
created at or after the moment no node was left (or was started by the caller itself: clocks may differ); one
transfer runs per instance at a time, so a running import or export is waited for.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from run_guard_gcp.api import GcpApi, GcpApiError

CHECKPOINTS_PATH = "/checkpoints"  # in the file system (the nodes mount its root at /fsx)
REQUEST_IDS = uuid.UUID("6f1d2a4e-9c1b-4a53-9a0e-3f5c2d1b7e10")  # namespace of our exportData request ids
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def find_instances(
    api: GcpApi, project: str, label: tuple[str, str], instance_id: str, named: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Managed Lustre instances labelled with the run or carrying its id (in any location), and those named in
    `named` (full names), once each. Listed without a server-side filter (a project holds few) and matched here;
    a location that cannot be read is an error (GcpApi.pages), never "no file system"."""
    key, value = label
    found = {
        fs["name"]: fs
        for page in api.pages("lustre", f"projects/{project}/locations/-/instances")
        for fs in page.get("instances", [])
        if (fs.get("labels") or {}).get(key) == value or fs["name"].rsplit("/", 1)[-1] == instance_id
    }
    for name in named:
        if name not in found:
            try:
                found[name] = api.get("lustre", name)
            except GcpApiError as error:
                if error.status != 404:
                    raise
    return list(found.values())


def transfers(api: GcpApi, instance: str, own: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The import and export operations of `instance`, oldest first; the caller's own exports (`own`, operation
    names) are read by name too (a list may lag, or name the target another way)."""
    location, _, instance_id = instance.partition("/instances/")
    suffix = f"/locations/{location.rsplit('/', 1)[-1]}/instances/{instance_id}"
    listed = {
        op["name"]: op
        for page in api.pages("lustre", f"{location}/operations")
        for op in page.get("operations", [])
        if str(metadata(op).get("target", "")).endswith(suffix) and transfer_type(op) is not None
    }
    for name in own:
        listed[name] = api.get("lustre", name)
    return sorted(listed.values(), key=lambda op: parse_time(metadata(op).get("createTime")) or EPOCH)


@dataclass(frozen=True)
class ExportDecision:
    """Where the export stands: "running" (a transfer of the instance runs; wait), "succeeded", "failed" (an own
    export failed: never started again behind the user's back), or "start" (none counts yet)."""

    state: Literal["running", "succeeded", "failed", "start"]
    detail: str
    operation: str | None = None


def decide_export(
    operations: Sequence[dict[str, Any]], destination: str, since: datetime | None, own: Iterable[str] = ()
) -> ExportDecision:
    own = set(own)
    running = [op for op in operations if not op.get("done")]  # one transfer per instance at a time
    if running:
        kind = "export" if transfer_type(running[0]) == "EXPORT" else "import"
        target = metadata(running[0]).get("target", "the instance")
        return ExportDecision("running", f"{kind} of {target} in progress", running[0]["name"])
    counted = [
        op for op in operations if op["name"] in own or (exports(op, destination) and created_at_or_after(op, since))
    ]
    good = [op for op in counted if "error" not in op and not failed_files(op)]
    if good:
        return ExportDecision("succeeded", f"exported to {destination}", good[-1]["name"])
    failed = [op for op in counted if op["name"] in own]
    if failed:
        return ExportDecision("failed", failure(failed[-1]), failed[-1]["name"])
    return ExportDecision("start", f"no export of {CHECKPOINTS_PATH} to {destination} counts yet")


def request_id(instance: str, destination: str, since: str | None) -> str:
    """The same id for the same export, so a retried POST (after a lost answer) is not a second one."""
    return str(uuid.uuid5(REQUEST_IDS, f"{instance}|{destination}|{since}"))


def start_export(api: GcpApi, instance: str, destination: str, since: str | None) -> dict[str, Any]:
    """exportData of /checkpoints to `destination` (a path in the bucket ends with "/"); the operation."""
    return api.call(
        "POST",
        "lustre",
        f"{instance}:exportData",
        body={
            "lustrePath": {"path": CHECKPOINTS_PATH},
            "gcsPath": {"uri": destination},
            "requestId": request_id(instance, destination, since),
        },
    )


def delete_instance(api: GcpApi, instance: str) -> str:
    """DELETE the instance: "deleting" (the operation started), or "already-deleted" (not found)."""
    try:
        api.call("DELETE", "lustre", instance)
    except GcpApiError as error:
        if error.status == 404:
            return "already-deleted"
        raise
    return "deleting"


def metadata(operation: dict[str, Any]) -> dict[str, Any]:
    value = operation.get("metadata")
    return value if isinstance(value, dict) else {}


def transfer(operation: dict[str, Any]) -> dict[str, Any]:
    value = metadata(operation).get("operationMetadata")
    return value if isinstance(value, dict) else {}


def transfer_type(operation: dict[str, Any]) -> str | None:
    """ "EXPORT" or "IMPORT" for a data transfer (its ExportDataMetadata/ImportDataMetadata), else None."""
    declared = transfer(operation).get("transferType")
    if declared in ("EXPORT", "IMPORT"):
        return declared
    kind = str(metadata(operation).get("@type", ""))
    return (
        "EXPORT" if kind.endswith(".ExportDataMetadata") else "IMPORT" if kind.endswith(".ImportDataMetadata") else None
    )


def exports(operation: dict[str, Any], destination: str) -> bool:
    """An export of exactly /checkpoints to `destination` (someone else's export of other data does not count)."""
    moved = transfer(operation)
    source = str((moved.get("sourceLustrePath") or {}).get("path", "")).rstrip("/")
    target = str((moved.get("destinationGcsPath") or {}).get("uri", "")).rstrip("/")
    return transfer_type(operation) == "EXPORT" and source == CHECKPOINTS_PATH and target == destination.rstrip("/")


def created_at_or_after(operation: dict[str, Any], cutoff: datetime | None) -> bool:
    created = parse_time(metadata(operation).get("createTime"))
    return cutoff is not None and created is not None and created >= cutoff


def failed_files(operation: dict[str, Any]) -> int:
    counters = transfer(operation).get("counters") or {}
    try:
        return int(counters.get("objectsFailedCount") or 0)
    except (TypeError, ValueError):
        return 0


def failure(operation: dict[str, Any]) -> str:
    if "error" in operation:
        error = operation["error"]
        return str(error.get("message") or error) if isinstance(error, dict) else str(error)
    return f"{failed_files(operation)} file(s) failed to copy (the operation's errorSummaries name them)"


def parse_time(text: Any) -> datetime | None:
    """An RFC 3339 time as Google writes them (`2026-03-01T12:00:00.123456789Z`, or with an offset), to the
    microsecond (Python reads at most 6 fractional digits)."""
    if not isinstance(text, str) or not text:
        return None
    head, dot, rest = text.partition(".")
    if dot:
        digits = rest[: len(rest) - len(rest.lstrip("0123456789"))]
        text = f"{head}.{digits[:6].ljust(6, '0')}{rest[len(digits) :]}"
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
