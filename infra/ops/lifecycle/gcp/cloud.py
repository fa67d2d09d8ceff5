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
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from infra.core.labels import account_id
from infra.ops.lifecycle.ports import (
    ExportStatus,
    Leftover,
    Marker,
    StoppedCompute,
    claim_key,
    iso_precise,
    parse_marker,
)
from infra.training.gcp.guard import tick_job_name
from infra.training.gcp.plan import checkpoints_uri, run_label, run_resource_name, run_resource_prefix
from run_guard_gcp import compute, lustre
from run_guard_gcp.api import GcpApi, GcpApiError
from run_guard_gcp.guard import DONE as GUARD_DONE

STOP_WAIT_SECONDS = 900  # deleting an A3 VM takes minutes; longer means something is wrong
STOP_POLL_SECONDS = 10
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
        region: str | None = None,
    ):
        self.project, self.data_bucket, self.region = project, data_bucket, region
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
        return compute.run_nodes(self.api, self.project, run_label(run_id))

    def active_nodes(self, run_id: str) -> int:
        return sum(1 for _, instance in self.nodes(run_id) if instance.get("status") in compute.BILLING_STATES)

    def stop_compute(self, run_id: str) -> StoppedCompute:
        """Delete every node of the run and return once none is listed; with when the last deletion ended,
        by Compute Engine's clock. A deletion that fails is an error at once, not after the wait."""
        deleting = (compute.delete_node(self.api, self.project, zone, i["name"]) for zone, i in self.nodes(run_id))
        operations = [op for op in deleting if op is not None]
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
        return lustre.parse_time(done.get("endTime"))

    # ---- checkpoints ------------------------------------------------------------------------------------
    def expect_file_systems(self, file_system_ids: Sequence[str], bucket: str | None = None) -> None:
        self.lustre_instances = tuple(dict.fromkeys((*self.lustre_instances, *file_system_ids)))
        self.named_by_outputs = tuple(dict.fromkeys((*self.named_by_outputs, *file_system_ids)))

    def file_systems(self, run_id: str) -> list[dict[str, Any]]:
        """Managed Lustre instances labelled with the run or carrying its name (in any location), and the ones
        the stack names, once each. Listed without a server-side filter (a project holds few), matched here."""
        return lustre.find_instances(
            self.api, self.project, run_label(run_id), run_resource_prefix(run_id), self.lustre_instances
        )

    def file_system_busy(self, run_id: str) -> str | None:
        """A Managed Lustre instance being deleted (by the run guard) still holds its network: wait for it."""
        deleting = [fs["name"] for fs in self.file_systems(run_id) if fs.get("state") == "DELETING"]
        return f"{', '.join(deleting)} is being deleted" if deleting else None

    def export_checkpoints(self, run_id: str, since: str | None = None) -> ExportStatus:
        """One step of exporting /checkpoints to gs://<dataBucket>/checkpoints/<run-id>/: wait while a
        transfer of the file system runs; done when an export of exactly that, with no file failed, created
        at/after `since` (or started by this object) succeeded; otherwise start one."""
        file_systems = self.file_systems(run_id)
        if not file_systems and self.named_by_outputs and (deleted := self._deleted_by_guard(run_id)):
            return ExportStatus("no-filesystem", deleted)
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
        decision = lustre.decide_export(
            lustre.transfers(self.api, instance, self._own_operations),
            destination,
            lustre.parse_time(since),
            self._own_operations,
        )
        if decision.state != "start":
            return ExportStatus(decision.state, decision.detail, decision.operation)
        operation = lustre.start_export(self.api, instance, destination, since)
        self._own_operations.append(operation["name"])
        return ExportStatus("started", f"export of {instance} to {destination}", operation["name"])

    def _deleted_by_guard(self, run_id: str) -> str | None:
        """Why the file systems the stack names are gone, when the run guard's record (runs/<run-id>/guard/done.json)
        says it deleted them after their checkpoints were out (exported, copied by the nodes, or not wanted)."""
        body = self.api.object_media(self.data_bucket, f"runs/{run_id}/guard/{GUARD_DONE}")
        try:
            done = json.loads(body) if body is not None else None
        except (ValueError, UnicodeDecodeError):
            return None
        if not isinstance(done, dict) or done.get("file_system_deletion") not in ("deleting", "already-deleted"):
            return None
        if done.get("file_system") not in self.named_by_outputs or len(self.named_by_outputs) != 1:
            return None
        return f"{done['file_system']} deleted by the run guard: {done.get('outcome', 'no outcome recorded')}"

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
            for _, d in compute.aggregated(
                self.api, self.project, "disks", {"filter": compute.label_filter(run_label(run_id))}
            )
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
            for _, item in compute.aggregated(self.api, self.project, collection)
        ]
        found += [
            Leftover(f"compute:{kind}", item["selfLink"], "compute-names")
            for kind, item in listed
            if named.match(str(item.get("name", "")))
        ]
        found += self._service_accounts(run_id) + self._tick_job(run_id)
        for page in self.api.pages(
            "asset", f"projects/{self.project}:searchAllResources", {"query": f'labels.{key}="{value}"'}
        ):
            found += [
                Leftover(str(result.get("assetType", "unknown")), str(result.get("name", "")), "asset-inventory")
                for result in page.get("results", [])
                if (result.get("labels") or {}).get(key) == value and result.get("assetType") not in LISTED_ASSET_TYPES
            ]
        return found

    def _service_accounts(self, run_id: str) -> list[Leftover]:
        """The nodes' and the run guard's service accounts (found by their ids: accounts take no labels)."""
        found = []
        for prefix in ("train", "guard"):
            email = f"{account_id(prefix, run_id)}@{self.project}.iam.gserviceaccount.com"
            if self._exists("iam", f"projects/{self.project}/serviceAccounts/{email}"):
                found.append(Leftover("iam:service-account", email, "iam"))
        return found

    def _tick_job(self, run_id: str) -> list[Leftover]:
        """The run guard's Cloud Scheduler job, by its name in the stack's region (jobs take no labels)."""
        if not self.region:
            return []
        name = f"projects/{self.project}/locations/{self.region}/jobs/{tick_job_name(run_id)}"
        return [Leftover("cloudscheduler:job", name, "scheduler")] if self._exists("scheduler", name) else []

    def _exists(self, service: str, path: str) -> bool:
        try:
            self.api.get(service, path)
        except GcpApiError as error:
            if error.status == 404:
                return False
            raise
        return True

    def _global(self, collection: str) -> list[dict[str, Any]]:
        path = f"projects/{self.project}/global/{collection}"
        return [item for page in self.api.pages("compute", path) for item in page.get("items", [])]
