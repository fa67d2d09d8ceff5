"""A run's Compute Engine nodes, over the REST API: found by the run's label in the aggregated list (a zone that
cannot be read is an error, never "no node"), deleted one by one. The lifecycle's GCP adapter and the guard both
use these, so they find and stop the same nodes."""

from __future__ import annotations

from typing import Any

from run_guard_gcp.api import GcpApi, GcpApiError

# Compute Engine bills vCPUs and GPUs in these states (stopping ones included: the guest is still shutting down).
BILLING_STATES = frozenset(
    {"PENDING", "PROVISIONING", "STAGING", "RUNNING", "PENDING_STOP", "STOPPING", "SUSPENDING", "REPAIRING"}
)
# DELETE answers these while another operation (Compute Engine's own deletion at terminationTime, a stop) runs on
# the instance: it is on its way out, so wait for it to be gone.
ALREADY_GOING = ("resourceNotReady", "RESOURCE_NOT_READY")


def label_filter(label: tuple[str, str]) -> str:
    key, value = label
    return f'labels.{key} = "{value}"'


def aggregated(
    api: GcpApi, project: str, collection: str, params: dict[str, str] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """(scope, item) of an aggregated list; scopes with nothing carry only a warning."""
    return [
        (scope, item)
        for page in api.pages("compute", f"projects/{project}/aggregated/{collection}", params)
        for scope, listed in (page.get("items") or {}).items()
        for item in (listed or {}).get(collection, [])
    ]


def run_nodes(api: GcpApi, project: str, label: tuple[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """(zone, instance) of every instance labelled with the run, whatever its status (the label is checked here
    again, as a filter is only a request)."""
    key, value = label
    return [
        (scope.rsplit("/", 1)[-1], instance)
        for scope, instance in aggregated(api, project, "instances", {"filter": label_filter(label)})
        if (instance.get("labels") or {}).get(key) == value
    ]


def delete_node(api: GcpApi, project: str, zone: str, name: str) -> dict[str, Any] | None:
    """Ask Compute Engine to delete the instance; its zonal operation, or None when it is gone or already on its
    way out (another operation, such as its deletion at terminationTime, runs on it)."""
    try:
        return api.call("DELETE", "compute", f"projects/{project}/zones/{zone}/instances/{name}")
    except GcpApiError as error:
        if error.status != 404 and error.reason not in ALREADY_GOING:
            raise
        return None
