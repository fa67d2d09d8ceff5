"""`RunCloud` on GCP, over the REST APIs (`gcp_api.GcpApi`): the run's markers in its data bucket, its
Compute Engine nodes (found by the `mlinfra-run-id` label), the export of its Managed Lustre checkpoints to
the data bucket (Managed Lustre's own `exportData`, for when the nodes could not copy them), and the audit.

The same contract as AWS's adapter: stop_compute deletes every node and returns once none is listed, so an
export started afterwards sees every write; export_checkpoints is one idempotent step, decided from the
file system's operations as Google lists them (stateless across runs of the command).
"""
from __future__ import annotations

import time
import uuid
from datetime import datetime, timezone
from typing import Any, Callable, Optional, Sequence

from infra.gcp_training_plan import checkpoints_uri, run_label, run_resource_prefix
from infra.lifecycle.gcp_api import GcpApi, GcpApiError
from infra.lifecycle.ports import ExportStatus, Leftover, Marker, StoppedCompute, iso_precise, parse_marker

# Compute Engine bills vCPUs and GPUs in these states (stopping ones included: the guest is still shutting down).
BILLING_STATES = frozenset({"PENDING", "PROVISIONING", "STAGING", "RUNNING", "PENDING_STOP", "STOPPING", "SUSPENDING",
                            "REPAIRING"})
STOP_WAIT_SECONDS = 900  # deleting an A3 VM takes minutes; longer means something is wrong
STOP_POLL_SECONDS = 10
CHECKPOINTS_PATH = "/checkpoints"  # the file system's root is mounted at /fsx on the nodes


class GcpRunCloud:
    """`project`: the run's project; `data_bucket`: where the nodes write markers and checkpoints (the
    stack's `dataBucket`). `lustre_instances`: the file system's full names as the stack records them,
    looked up directly too, so a label mismatch cannot pass for "no file system left"."""

    def __init__(self, project: str, data_bucket: str, api: Optional[GcpApi] = None,
                 sleep: Callable[[float], None] = time.sleep, lustre_instances: Sequence[str] = ()):
        self.project, self.data_bucket = project, data_bucket
        self.api = api or GcpApi()
        self.sleep = sleep
        self.lustre_instances = tuple(lustre_instances)
        self._own_operations: set[str] = set()  # exports this object started: they count whatever the clocks say

    # ---- markers and nodes ------------------------------------------------------------------------------
    def marker(self, bucket: str, run_id: str) -> Optional[Marker]:
        """runs/<run-id>/_SUCCESS, else _FAILED, else None."""
        for status in ("SUCCESS", "FAILED"):
            body = self.api.object_media(bucket, f"runs/{run_id}/_{status}")
            if body is not None:
                return parse_marker(status, body)
        return None

    def nodes(self, run_id: str) -> list[tuple[str, dict[str, Any]]]:
        """(zone, instance) of every instance labelled with the run, whatever its status."""
        key, value = run_label(run_id)
        found = []
        for page in self.api.pages("compute", f"projects/{self.project}/aggregated/instances",
                                   {"filter": f'labels.{key} = "{value}"'}):
            for scope, listed in (page.get("items") or {}).items():
                zone = scope.rsplit("/", 1)[-1]
                found += [(zone, instance) for instance in listed.get("instances", [])
                          if (instance.get("labels") or {}).get(key) == value]
        return found

    def active_nodes(self, run_id: str) -> int:
        return sum(1 for _, instance in self.nodes(run_id) if instance.get("status") in BILLING_STATES)

    def stop_compute(self, run_id: str) -> StoppedCompute:
        """Delete every node of the run and return once none is listed; with when the last deletion ended,
        by Compute Engine's clock."""
        operations = []
        for zone, instance in self.nodes(run_id):
            try:
                operations.append(self.api.call(
                    "DELETE", "compute", f"projects/{self.project}/zones/{zone}/instances/{instance['name']}"))
            except GcpApiError as error:
                if error.status != 404:  # already gone
                    raise
        names = tuple(op.get("targetLink", "").rsplit("/", 1)[-1] for op in operations)
        deadline = time.monotonic() + STOP_WAIT_SECONDS
        while self.nodes(run_id):
            if time.monotonic() >= deadline:
                raise RuntimeError(f"instances of run {run_id} still listed {STOP_WAIT_SECONDS} s after their deletion")
            self.sleep(STOP_POLL_SECONDS)
        ends = [end for end in (self._operation_end(op) for op in operations) if end is not None]
        return StoppedCompute(names, iso_precise(max(ends)) if ends else None)

    def _operation_end(self, operation: dict[str, Any]) -> Optional[datetime]:
        link = operation.get("selfLink")
        if not link:
            return None
        path = link.split("/compute/v1/", 1)[-1]
        try:
            done = self.api.get("compute", path)
        except GcpApiError as error:
            if error.status == 404:
                return None
            raise
        return _parse_time(done.get("endTime"))

    # ---- checkpoints ------------------------------------------------------------------------------------
    def expect_file_systems(self, file_system_ids: Sequence[str]) -> None:
        self.lustre_instances = tuple(dict.fromkeys((*self.lustre_instances, *file_system_ids)))

    def file_systems(self, run_id: str) -> list[dict[str, Any]]:
        """Managed Lustre instances labelled with the run, or else the ones the stack names."""
        key, value = run_label(run_id)
        found = [fs for page in self.api.pages("lustre", f"projects/{self.project}/locations/-/instances",
                                               {"filter": f'labels.{key}="{value}"'})
                 for fs in page.get("instances", []) if (fs.get("labels") or {}).get(key) == value]
        if found:
            return found
        named = []
        for name in self.lustre_instances:
            try:
                named.append(self.api.get("lustre", name))
            except GcpApiError as error:
                if error.status != 404:
                    raise
        return named

    def export_checkpoints(self, run_id: str, since: Optional[str] = None) -> ExportStatus:
        """One step of exporting /checkpoints to gs://<dataBucket>/checkpoints/<run-id>/: wait while an
        export of the file system runs; done when one created at/after `since` (or started by this object)
        succeeded; otherwise start one."""
        file_systems = self.file_systems(run_id)
        if not file_systems:
            named = f" nor is named {', '.join(self.lustre_instances)}" if self.lustre_instances else ""
            return ExportStatus("no-filesystem", f"no Managed Lustre instance carries the label {'='.join(run_label(run_id))}"
                                                 f"{named}")
        live = [fs for fs in file_systems if fs.get("state") != "DELETING"]
        if not live:
            return ExportStatus("deleting", f"{', '.join(fs['name'] for fs in file_systems)} is being deleted")
        if len(live) > 1:
            return ExportStatus("failed", f"{len(live)} file systems carry the run's label: "
                                          f"{', '.join(fs['name'] for fs in live)}")
        instance = live[0]["name"]
        transfers = self._transfers(instance)
        running = [op for op in transfers if not op.get("done")]  # one transfer per instance at a time
        if running:
            kind = "export" if _is_export(running[0]) else "import"
            return ExportStatus("running", f"{kind} of {instance} in progress", running[0]["name"])
        exports = [op for op in transfers if _is_export(op)]
        cutoff = _parse_time(since)

        def after_cutoff(op: dict[str, Any]) -> bool:
            created = _parse_time(_metadata(op).get("createTime"))
            return cutoff is not None and created is not None and created >= cutoff

        counted = [op for op in exports if op["name"] in self._own_operations or after_cutoff(op)]
        if any("error" not in op for op in counted):
            done = next(op for op in counted if "error" not in op)
            return ExportStatus("succeeded", f"exported to {checkpoints_uri(self.data_bucket, run_id)}", done["name"])
        failed = [op for op in counted if op["name"] in self._own_operations]
        if failed:
            error = failed[-1]["error"]
            return ExportStatus("failed", f"{error.get('message') or error}", failed[-1]["name"])
        operation = self.api.call("POST", "lustre", f"{instance}:exportData", body={
            "lustrePath": {"path": CHECKPOINTS_PATH},
            "gcsPath": {"uri": checkpoints_uri(self.data_bucket, run_id)},  # a path in the bucket ends with "/"
            "requestId": str(uuid.uuid4()),
        })
        self._own_operations.add(operation["name"])
        return ExportStatus("started", f"export of {instance} to {checkpoints_uri(self.data_bucket, run_id)}",
                            operation["name"])

    def _transfers(self, instance: str) -> list[dict[str, Any]]:
        """The import and export operations of `instance`, oldest first."""
        location = instance.split("/instances/", 1)[0]
        operations = [op for page in self.api.pages("lustre", f"{location}/operations")
                      for op in page.get("operations", [])
                      if _metadata(op).get("target") == instance and _transfer_type(op) is not None]
        return sorted(operations, key=lambda op: _parse_time(_metadata(op).get("createTime")) or _EPOCH)

    # ---- audit ------------------------------------------------------------------------------------------
    def audit(self, run_id: str) -> list[Leftover]:
        """Everything of the run still there: labelled instances, disks and file systems, the networks, subnets,
        firewalls, routers, reserved ranges and placement policy named after the run (they take no labels),
        and whatever else Cloud Asset Inventory finds with the run's label."""
        key, value = run_label(run_id)
        prefix = run_resource_prefix(run_id)
        found: list[Leftover] = []
        labelled = {"filter": f'labels.{key} = "{value}"'}
        found += [Leftover("compute:instance", i["selfLink"], "compute-labels") for _, i in self.nodes(run_id)]
        found += [Leftover("compute:disk", d["selfLink"], "compute-labels")
                  for d in self._aggregated("disks", labelled) if (d.get("labels") or {}).get(key) == value]
        found += [Leftover("lustre:instance", fs["name"], "lustre-labels") for fs in self.file_systems(run_id)]
        for kind, listed in (("networks", self._global("networks")), ("firewalls", self._global("firewalls")),
                             ("addresses", self._global("addresses")), ("subnetworks", self._aggregated("subnetworks")),
                             ("routers", self._aggregated("routers")),
                             ("resourcePolicies", self._aggregated("resourcePolicies"))):
            found += [Leftover(f"compute:{kind}", r["selfLink"], "compute-names") for r in listed
                      if r.get("name") == prefix or str(r.get("name", "")).startswith(prefix + "-")]
        seen = {leftover.identifier.split("/compute/v1/", 1)[-1] for leftover in found} | {f.identifier for f in found}
        for page in self.api.pages("asset", f"projects/{self.project}:searchAllResources",
                                   {"query": f"labels.{key}={value}"}):
            for result in page.get("results", []):
                name = str(result.get("name", ""))
                if (result.get("labels") or {}).get(key) == value and not any(name.endswith(k) for k in seen):
                    found.append(Leftover(str(result.get("assetType", "unknown")), name, "asset-inventory"))
        return found

    def _global(self, collection: str) -> list[dict[str, Any]]:
        path = f"projects/{self.project}/global/{collection}"
        return [item for page in self.api.pages("compute", path) for item in page.get("items", [])]

    def _aggregated(self, collection: str, params: Optional[dict[str, str]] = None) -> list[dict[str, Any]]:
        path = f"projects/{self.project}/aggregated/{collection}"
        items = []
        for page in self.api.pages("compute", path, params):
            for listed in (page.get("items") or {}).values():
                items += listed.get(collection, [])
        return items


def _metadata(operation: dict[str, Any]) -> dict[str, Any]:
    metadata = operation.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def _transfer_type(operation: dict[str, Any]) -> Optional[str]:
    """"EXPORT" or "IMPORT" for a data transfer (its ExportDataMetadata/ImportDataMetadata), else None."""
    metadata = _metadata(operation)
    declared = (metadata.get("operationMetadata") or {}).get("transferType")
    if declared in ("EXPORT", "IMPORT"):
        return declared
    kind = str(metadata.get("@type", ""))
    return "EXPORT" if kind.endswith(".ExportDataMetadata") else "IMPORT" if kind.endswith(".ImportDataMetadata") else None


def _is_export(operation: dict[str, Any]) -> bool:
    return _transfer_type(operation) == "EXPORT"


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _parse_time(text: Any) -> Optional[datetime]:
    """An RFC 3339 time as Google writes them (`2026-03-01T12:00:00.123456789Z`, or with an offset)."""
    if not isinstance(text, str) or not text:
        return None
    head, _, rest = text.partition(".")
    if rest:  # drop fractional digits (Python reads at most 6), keep the zone
        zone = rest.lstrip("0123456789")
        text = head + zone
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
