"""`RunCloud` on GCP, over the REST APIs (`gcp_api.GcpApi`): the run's markers in its data bucket, its
Compute Engine nodes (found by the `mlinfra-run-id` label), the export of its Managed Lustre checkpoints to
the data bucket (Managed Lustre's own `exportData`, for when the nodes could not copy them), and the audit.

The same contract as AWS's adapter: stop_compute deletes every node and returns once none is listed, so an
export started afterwards sees every write; export_checkpoints is one idempotent step, decided from the
file system's operations as Google lists them (stateless across runs of the command).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from infra.core.labels import account_id
from infra.ops.lifecycle.gcp.api import GcpApi, GcpApiError
from infra.ops.lifecycle.ports import (
    ExportStatus,
    Leftover,
    Marker,
    StoppedCompute,
    claim_key,
    iso_precise,
    parse_marker,
)
from infra.training.gcp.plan import checkpoints_uri, run_label, run_resource_name, run_resource_prefix

# Compute Engine bills vCPUs and GPUs in these states (stopping ones included: the guest is still shutting down).
BILLING_STATES = frozenset(
    {"PENDING", "PROVISIONING", "STAGING", "RUNNING", "PENDING_STOP", "STOPPING", "SUSPENDING", "REPAIRING"}
)
STOP_WAIT_SECONDS = 900  # deleting an A3 VM takes minutes; longer means something is wrong
STOP_POLL_SECONDS = 10
CHECKPOINTS_PATH = "/checkpoints"  # in the file system (the nodes mount its root at /fsx)
# DELETE answers these while another operation (Compute Engine's own deletion at terminationTime, a stop)
# runs on the instance: the instance is on its way out, so keep waiting for it to be gone.
ALREADY_GOING = ("resourceNotReady", "RESOURCE_NOT_READY")
REQUEST_IDS = uuid.UUID("6f1d2a4e-9c1b-4a53-9a0e-3f5c2d1b7e10")  # namespace of our exportData request ids
# What the audit lists directly (authoritative, no index lag); Cloud Asset Inventory adds only other types.
LISTED_ASSET_TYPES = frozenset(
    {
        "compute.googleapis.com/Instance",
        "compute.googleapis.com/Disk",
        "compute.googleapis.com/Network",
        "compute.googleapis.com/Subnetwork",
        "compute.googleapis.com/Firewall",
        "compute.googleapis.com/Router",
        "compute.googleapis.com/GlobalAddress",
        "compute.googleapis.com/Address",
        "compute.googleapis.com/ResourcePolicy",
        "lustre.googleapis.com/Instance",
        "iam.googleapis.com/ServiceAccount",
    }
)


class GcpRunCloud:
    """`project`: the run's project; `data_bucket`: where the nodes write markers and checkpoints (the
    stack's `dataBucket`). `lustre_instances`: the file system's full names (from the stack's config or
    outputs), looked up directly too, so a label mismatch cannot pass for "no file system left"."""

    def __init__(
        self,
        project: str,
        data_bucket: str,
        api: GcpApi | None = None,
        sleep: Callable[[float], None] = time.sleep,
        lustre_instances: Sequence[str] = (),
    ):
        self.project, self.data_bucket = project, data_bucket
        self.api = api or GcpApi()
        self.sleep = sleep
        self.lustre_instances = tuple(lustre_instances)
        self.named_by_outputs: tuple[str, ...] = ()  # instances the stack's outputs name: never silently gone
        self._own_operations: list[str] = []  # exports this object started: they count whatever the clocks say

    # ---- markers and nodes ------------------------------------------------------------------------------
    def marker(self, bucket: str, run_id: str) -> Marker | None:
        """runs/<run-id>/_SUCCESS, else _FAILED, else None."""
        for status in ("SUCCESS", "FAILED"):
            body = self.api.object_media(bucket, f"runs/{run_id}/_{status}")
            if body is not None:
                return parse_marker(status, body)
        return None

    def claim(self, bucket: str, run_id: str, claim: dict[str, str]) -> dict[str, Any]:
        key = claim_key(run_id)
        if self.api.create_object(bucket, key, json.dumps(claim).encode()):
            return claim
        held = json.loads(self.api.object_media(bucket, key) or b"{}")
        return held if isinstance(held, dict) else {}

    def nodes(self, run_id: str) -> list[tuple[str, dict[str, Any]]]:
        """(zone, instance) of every instance labelled with the run, whatever its status."""
        key, value = run_label(run_id)
        return [
            (scope.rsplit("/", 1)[-1], instance)
            for scope, instance in self._aggregated("instances", {"filter": _label_filter(run_id)})
            if (instance.get("labels") or {}).get(key) == value
        ]

    def active_nodes(self, run_id: str) -> int:
        return sum(1 for _, instance in self.nodes(run_id) if instance.get("status") in BILLING_STATES)

    def stop_compute(self, run_id: str) -> StoppedCompute:
        """Delete every node of the run and return once none is listed; with when the last deletion ended,
        by Compute Engine's clock. A deletion that fails is an error at once, not after the wait."""
        operations = []
        for zone, instance in self.nodes(run_id):
            try:
                operations.append(
                    self.api.call(
                        "DELETE", "compute", f"projects/{self.project}/zones/{zone}/instances/{instance['name']}"
                    )
                )
            except GcpApiError as error:
                if error.status != 404 and error.reason not in ALREADY_GOING:
                    raise
        names = tuple(op.get("targetLink", "").rsplit("/", 1)[-1] for op in operations)
        ends: dict[str, datetime] = {}  # delete operation -> when it ended
        for _ in range(STOP_WAIT_SECONDS // STOP_POLL_SECONDS):
            gone = not self.nodes(run_id)
            for op in operations:
                if op["name"] not in ends and (end := self._finished(op)) is not None:  # raises if one failed
                    ends[op["name"]] = end
            if gone:
                return StoppedCompute(names, iso_precise(max(ends.values())) if ends else None)
            self.sleep(STOP_POLL_SECONDS)
        raise GcpApiError(
            0,
            "DEADLINE_EXCEEDED",
            f"instances of run {run_id} still listed {STOP_WAIT_SECONDS} s "
            "after their deletion was asked; nothing else was changed",
        )

    def _finished(self, operation: dict[str, Any]) -> datetime | None:
        """When a zonal delete operation ended (None while it runs); GcpApiError if it failed."""
        link = operation.get("selfLink")
        if not link:
            return None
        done = self.api.get("compute", link.split("/compute/v1/", 1)[-1])
        if done.get("status") != "DONE":
            return None
        errors = (done.get("error") or {}).get("errors") or []
        if errors:
            first = errors[0]
            raise GcpApiError(
                int(done.get("httpErrorStatusCode") or 0),
                str(first.get("code", "OPERATION_FAILED")),
                f"deleting {done.get('targetLink', 'an instance')}: {first.get('message', '')}",
            )
        return _parse_time(done.get("endTime"))

    # ---- checkpoints ------------------------------------------------------------------------------------
    def expect_file_systems(self, file_system_ids: Sequence[str], bucket: str | None = None) -> None:
        self.lustre_instances = tuple(dict.fromkeys((*self.lustre_instances, *file_system_ids)))
        self.named_by_outputs = tuple(dict.fromkeys((*self.named_by_outputs, *file_system_ids)))

    def file_systems(self, run_id: str) -> list[dict[str, Any]]:
        """Managed Lustre instances labelled with the run or carrying its name (in any location), and the ones
        the stack names, once each. Listed without a server-side filter (a project holds few), matched here."""
        key, value = run_label(run_id)
        own_id = run_resource_prefix(run_id)
        found = {
            fs["name"]: fs
            for page in self.api.pages("lustre", f"projects/{self.project}/locations/-/instances")
            for fs in page.get("instances", [])
            if (fs.get("labels") or {}).get(key) == value or fs["name"].rsplit("/", 1)[-1] == own_id
        }
        for name in self.lustre_instances:
            if name not in found:
                try:
                    found[name] = self.api.get("lustre", name)
                except GcpApiError as error:
                    if error.status != 404:
                        raise
        return list(found.values())

    def export_checkpoints(self, run_id: str, since: str | None = None) -> ExportStatus:
        """One step of exporting /checkpoints to gs://<dataBucket>/checkpoints/<run-id>/: wait while a
        transfer of the file system runs; done when an export of exactly that, with no file failed, created
        at/after `since` (or started by this object) succeeded; otherwise start one."""
        file_systems = self.file_systems(run_id)
        if not file_systems and self.named_by_outputs:
            return ExportStatus(
                "missing",
                f"Managed Lustre instance {', '.join(self.named_by_outputs)}, named by the stack's outputs, is not "
                f"found in project {self.project}",
            )
        if not file_systems:
            named = f" nor is named {', '.join(self.lustre_instances)}" if self.lustre_instances else ""
            return ExportStatus(
                "no-filesystem", f"no Managed Lustre instance carries the label {'='.join(run_label(run_id))}{named}"
            )
        if all(fs.get("state") == "DELETING" for fs in file_systems):
            return ExportStatus("deleting", f"{', '.join(fs['name'] for fs in file_systems)} is being deleted")
        live = [fs for fs in file_systems if fs.get("state") != "DELETING"]
        if len(live) > 1:
            return ExportStatus(
                "failed", f"{len(live)} file systems belong to the run: {', '.join(fs['name'] for fs in live)}"
            )
        instance, state = live[0]["name"], live[0].get("state")
        if state == "CREATING":  # it never became ACTIVE, so no node ever wrote to it
            return ExportStatus("no-filesystem", f"{instance} is still being created: nothing was written to it")
        if state != "ACTIVE":
            return ExportStatus(
                "failed",
                f"{instance} is {state}: Managed Lustre exports only from an ACTIVE instance; nothing was destroyed",
            )
        destination = checkpoints_uri(self.data_bucket, run_id)
        transfers = self._transfers(instance)
        running = [op for op in transfers if not op.get("done")]  # one transfer per instance at a time
        if running:
            kind = "export" if _transfer_type(running[0]) == "EXPORT" else "import"
            return ExportStatus("running", f"{kind} of {instance} in progress", running[0]["name"])
        cutoff = _parse_time(since)
        counted = [
            op
            for op in transfers
            if op["name"] in self._own_operations or (_exports(op, destination) and _created_at_or_after(op, cutoff))
        ]
        good = [op for op in counted if "error" not in op and not _failed_files(op)]
        if good:
            return ExportStatus("succeeded", f"exported to {destination}", good[-1]["name"])
        failed = [op for op in counted if op["name"] in self._own_operations]
        if failed:
            return ExportStatus("failed", _failure(failed[-1]), failed[-1]["name"])
        operation = self.api.call(
            "POST",
            "lustre",
            f"{instance}:exportData",
            body={
                "lustrePath": {"path": CHECKPOINTS_PATH},
                "gcsPath": {"uri": destination},  # a path in the bucket ends with "/"
                # the same request id for the same export, so a retried POST (after a lost answer) is not a second one
                "requestId": str(uuid.uuid5(REQUEST_IDS, f"{instance}|{destination}|{since}")),
            },
        )
        self._own_operations.append(operation["name"])
        return ExportStatus("started", f"export of {instance} to {destination}", operation["name"])

    def _transfers(self, instance: str) -> list[dict[str, Any]]:
        """The import and export operations of `instance`, oldest first; this object's own exports are read
        by name (a list may lag, or name the target another way)."""
        location, _, instance_id = instance.partition("/instances/")
        suffix = f"/locations/{location.rsplit('/', 1)[-1]}/instances/{instance_id}"
        listed = {
            op["name"]: op
            for page in self.api.pages("lustre", f"{location}/operations")
            for op in page.get("operations", [])
            if str(_metadata(op).get("target", "")).endswith(suffix) and _transfer_type(op) is not None
        }
        for name in self._own_operations:
            listed[name] = self.api.get("lustre", name)
        return sorted(listed.values(), key=lambda op: _parse_time(_metadata(op).get("createTime")) or _EPOCH)

    # ---- audit ------------------------------------------------------------------------------------------
    def audit(self, run_id: str) -> list[Leftover]:
        """Everything of the run still there: labelled instances, disks and file systems; the networks, subnets,
        firewalls, routers, reserved range and placement policy named for the run (they take no labels), its
        service account; and whatever else Cloud Asset Inventory finds with the run's label."""
        key, value = run_label(run_id)
        named = run_resource_name(run_id)
        found = [Leftover("compute:instance", i["selfLink"], "compute-labels") for _, i in self.nodes(run_id)]
        found += [
            Leftover("compute:disk", d["selfLink"], "compute-labels")
            for _, d in self._aggregated("disks", {"filter": _label_filter(run_id)})
            if (d.get("labels") or {}).get(key) == value
        ]
        found += [
            Leftover(
                "lustre:instance", fs["name"] + (" (being deleted)" if fs.get("state") == "DELETING" else ""), "lustre"
            )
            for fs in self.file_systems(run_id)
        ]
        listed = [
            (kind, item)
            for kind, collection in (
                ("network", "networks"),
                ("firewall", "firewalls"),
                ("global-address", "addresses"),
            )
            for item in self._global(collection)
        ]
        listed += [
            (kind, item)
            for kind, collection in (
                ("subnetwork", "subnetworks"),
                ("router", "routers"),
                ("resource-policy", "resourcePolicies"),
            )
            for _, item in self._aggregated(collection)
        ]
        found += [
            Leftover(f"compute:{kind}", item["selfLink"], "compute-names")
            for kind, item in listed
            if named.match(str(item.get("name", "")))
        ]
        found += self._service_account(run_id)
        for page in self.api.pages(
            "asset", f"projects/{self.project}:searchAllResources", {"query": f'labels.{key}="{value}"'}
        ):
            found += [
                Leftover(str(result.get("assetType", "unknown")), str(result.get("name", "")), "asset-inventory")
                for result in page.get("results", [])
                if (result.get("labels") or {}).get(key) == value and result.get("assetType") not in LISTED_ASSET_TYPES
            ]
        return found

    def _service_account(self, run_id: str) -> list[Leftover]:
        email = f"{account_id('train', run_id)}@{self.project}.iam.gserviceaccount.com"
        try:
            self.api.get("iam", f"projects/{self.project}/serviceAccounts/{email}")
        except GcpApiError as error:
            if error.status == 404:
                return []
            raise
        return [Leftover("iam:service-account", email, "iam")]

    def _global(self, collection: str) -> list[dict[str, Any]]:
        path = f"projects/{self.project}/global/{collection}"
        return [item for page in self.api.pages("compute", path) for item in page.get("items", [])]

    def _aggregated(self, collection: str, params: dict[str, str] | None = None) -> list[tuple[str, dict[str, Any]]]:
        """(scope, item) of an aggregated list; scopes with nothing carry only a warning."""
        path = f"projects/{self.project}/aggregated/{collection}"
        return [
            (scope, item)
            for page in self.api.pages("compute", path, params)
            for scope, listed in (page.get("items") or {}).items()
            for item in (listed or {}).get(collection, [])
        ]


def _label_filter(run_id: str) -> str:
    key, value = run_label(run_id)
    return f'labels.{key} = "{value}"'


def _metadata(operation: dict[str, Any]) -> dict[str, Any]:
    metadata = operation.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def _transfer(operation: dict[str, Any]) -> dict[str, Any]:
    transfer = _metadata(operation).get("operationMetadata")
    return transfer if isinstance(transfer, dict) else {}


def _transfer_type(operation: dict[str, Any]) -> str | None:
    """ "EXPORT" or "IMPORT" for a data transfer (its ExportDataMetadata/ImportDataMetadata), else None."""
    declared = _transfer(operation).get("transferType")
    if declared in ("EXPORT", "IMPORT"):
        return declared
    kind = str(_metadata(operation).get("@type", ""))
    return (
        "EXPORT" if kind.endswith(".ExportDataMetadata") else "IMPORT" if kind.endswith(".ImportDataMetadata") else None
    )


def _exports(operation: dict[str, Any], destination: str) -> bool:
    """An export of exactly /checkpoints to `destination` (someone else's export of other data does not count)."""
    transfer = _transfer(operation)
    source = str((transfer.get("sourceLustrePath") or {}).get("path", "")).rstrip("/")
    target = str((transfer.get("destinationGcsPath") or {}).get("uri", "")).rstrip("/")
    return _transfer_type(operation) == "EXPORT" and source == CHECKPOINTS_PATH and target == destination.rstrip("/")


def _created_at_or_after(operation: dict[str, Any], cutoff: datetime | None) -> bool:
    created = _parse_time(_metadata(operation).get("createTime"))
    return cutoff is not None and created is not None and created >= cutoff


def _failed_files(operation: dict[str, Any]) -> int:
    counters = _transfer(operation).get("counters") or {}
    try:
        return int(counters.get("objectsFailedCount") or 0)
    except (TypeError, ValueError):
        return 0


def _failure(operation: dict[str, Any]) -> str:
    if "error" in operation:
        error = operation["error"]
        return str(error.get("message") or error) if isinstance(error, dict) else str(error)
    return f"{_failed_files(operation)} file(s) failed to copy (the operation's errorSummaries name them)"


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _parse_time(text: Any) -> datetime | None:
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
