"""The GCP guard and the lifecycle's GCP adapter decide alike on the same emulator scenarios (what counts as the
export of /checkpoints, waiting for a running transfer, an unreachable zone as an error), and the guard stops a
run within the documented bound after expires-at (a fixed clock, the slowest steps the design allows)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from infra.training import limits
from run_guard_gcp import config as guard_config
from run_guard_gcp.api import GcpApiError
from run_guard_gcp.config import load_config
from run_guard_gcp.guard import DONE, STOPPED, Records
from run_guard_gcp.handler import handle_event
from tests.infra.ops.lifecycle.gcp_guard_world import EXPIRY, INSTANCE, guard_api, guard_env, guard_object, tick
from tests.infra.ops.lifecycle.gcp_world import BUCKET, RUN, seed_run

DESTINATION = f"gs://{BUCKET}/checkpoints/{RUN}/"
STOPPED_AT = EXPIRY + timedelta(minutes=2)  # when no node was left, for both


def _guard_says(gcp, at) -> str:
    """The guard's view after its records say the nodes stopped at STOPPED_AT: "started", "running", "succeeded",
    "failed" or an error's reason."""
    Records(guard_api(gcp), load_config(guard_env())).create(STOPPED, {"at": STOPPED_AT.isoformat()})
    result = handle_event(tick(at), guard_env(), guard_api(gcp), now=lambda: at)
    if result["action"] == "error":
        return result["outcome"].split(": ", 2)[2]
    return result["export"]["state"]


def _lifecycle_says(gcp_cloud) -> str:
    try:
        return gcp_cloud.export_checkpoints(RUN, STOPPED_AT.isoformat()).state
    except GcpApiError as error:
        return type(error).__name__


SCENARIOS = {
    "an export created before the nodes were gone": (dict(created=-1), "started"),
    "an import, not an export": (dict(created=1, transfer="IMPORT"), "started"),
    "an export of other data": (dict(created=1, path="/datasets"), "started"),
    "an export to another place": (dict(created=1, uri="gs://elsewhere/checkpoints/"), "started"),
    "an export that left files behind": (dict(created=1, failed_files=3), "started"),
    "an export that ended in error": (dict(created=1, error="internal error"), "started"),
    "a good export after the nodes were gone": (dict(created=1), "succeeded"),
    "a transfer still running": (dict(created=1, done=False), "running"),
}


@pytest.mark.parametrize("why", SCENARIOS)
def test_the_guard_and_teardown_count_the_same_exports(gcp, gcp_cloud, why):
    operation, expected = SCENARIOS[why]

    def seed():
        name = seed_run(gcp, nodes=0)
        spec = dict(operation)
        created = STOPPED_AT + timedelta(minutes=spec.pop("created"))
        gcp.add_lustre_operation(
            name, spec.pop("transfer", "EXPORT"), created, uri=spec.pop("uri", DESTINATION), **spec
        )

    seed()
    lifecycle = _lifecycle_says(gcp_cloud)
    gcp.file_systems.clear()
    gcp.lustre_operations.clear()
    seed()
    guard = _guard_says(gcp, STOPPED_AT + timedelta(minutes=5))
    assert (lifecycle, guard) == (expected, expected)


def test_both_refuse_a_list_with_an_unreachable_zone(gcp, gcp_cloud):
    seed_run(gcp, nodes=1)
    gcp.unreachable_zones.append("us-central1-b")
    with pytest.raises(GcpApiError, match="UNREACHABLE"):
        gcp_cloud.stop_compute(RUN)
    assert _guard_says(gcp, EXPIRY).startswith("UNREACHABLE")
    assert not [m for m, *_ in gcp.requests if m == "DELETE"]


def test_the_guards_timing_constants_are_the_designs():
    assert guard_config.TICK_SECONDS == limits.GCP_GUARD_TICK_SECONDS
    assert guard_config.RETRY_WINDOW_SECONDS == limits.GUARD_RETRY_WINDOW_SECONDS
    assert guard_config.EXPORT_MAX_SECONDS == limits.GCP_GUARD_EXPORT_MAX_SECONDS


def test_nothing_of_the_run_bills_past_expires_at_plus_the_bound(gcp):
    """A fixed clock; a tick every minute from the first whole minute after expires-at (expires-at a moment past
    the minute: the worst case); the nodes' deletion and the export take the longest the design allows."""
    gcp.clock = lambda: now[0]
    seed_run(gcp, nodes=2)
    gcp.delete_lists = limits.GCP_NODE_DELETE_SECONDS // limits.GCP_GUARD_TICK_SECONDS
    gcp.export.polls = limits.EXPORT_WAIT_SECONDS // limits.GCP_GUARD_TICK_SECONDS
    expires = EXPIRY + timedelta(seconds=1)
    env = guard_env(MLINFRA_EXPIRES_AT=expires.strftime("%Y-%m-%dT%H:%M:%SZ"))
    now = [EXPIRY - timedelta(minutes=1)]
    while guard_object(gcp, f"runs/{RUN}/guard/{DONE}") is None and now[0] < expires + timedelta(hours=3):
        handle_event(tick(now[0]), env, guard_api(gcp), now=lambda: now[0])
        now[0] += timedelta(seconds=limits.GCP_GUARD_TICK_SECONDS)
    took = (gcp.lustre_deleted_at[INSTANCE] - expires).total_seconds()
    print(f"file system deletion asked {took:g} s after expires-at")
    assert not gcp.instances and gcp.file_systems[INSTANCE]["state"] == "DELETING"
    assert took <= limits.GCP_GUARD_EXPIRY_TO_DELETE_SECONDS, took
    assert took > limits.GCP_GUARD_EXPIRY_TO_DELETE_SECONDS - 2 * limits.GCP_GUARD_TICK_SECONDS  # the bound is tight
    assert guard_object(gcp, f"runs/{RUN}/guard/{DONE}")["export"]["state"] == "succeeded"
