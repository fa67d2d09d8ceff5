"""`GcpRunCloud` against local emulators (tests/lifecycle/gcp_world.py)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from infra.lifecycle.gcp_api import GcpApiError
from tests.lifecycle.gcp_world import BUCKET, LABEL, OTHER, PROJECT, RUN, ZONE, put_object, seed_run


def test_marker_success_then_failed_then_none(gcp, gcp_cloud):
    assert gcp_cloud.marker(BUCKET, RUN) is None
    put_object(gcp.storage, f"runs/{RUN}/_FAILED", b'{"exit_code": 3, "checkpoints_exported": false}')
    marker = gcp_cloud.marker(BUCKET, RUN)
    assert (marker.status, marker.exit_code, marker.checkpoints_exported) == ("FAILED", 3, False)
    put_object(gcp.storage, f"runs/{RUN}/_SUCCESS", b"not json")
    assert gcp_cloud.marker(BUCKET, RUN).status == "SUCCESS"  # an unreadable body still counts
    assert gcp_cloud.marker(BUCKET, OTHER) is None


def test_active_nodes_count_billing_states_of_this_run_only(gcp, gcp_cloud):
    seed_run(gcp, nodes=4)
    seed_run(gcp, OTHER, nodes=2)
    gcp.instances[(ZONE, f"mlinfra-{RUN}-node-3")]["status"] = "TERMINATED"  # powered off: no vCPU/GPU billing
    assert gcp_cloud.active_nodes(RUN) == 3
    listed = [q for m, path, q, _ in gcp.requests if path.endswith("/aggregated/instances")]
    assert listed[0]["filter"] == [f'labels.{LABEL} = "{RUN}"']
    assert len(listed) >= 2  # 6 instances at 3 per page: the second page was read


def test_stop_compute_deletes_the_runs_nodes_waits_until_gone_and_says_when(gcp, gcp_cloud):
    seed_run(gcp, nodes=2)
    seed_run(gcp, OTHER, nodes=1)
    stopped = gcp_cloud.stop_compute(RUN)
    assert sorted(stopped.instance_ids) == [f"mlinfra-{RUN}-node-0", f"mlinfra-{RUN}-node-1"]
    deletes = [path for method, path, _, _ in gcp.requests if method == "DELETE"]
    assert deletes == [f"/compute/v1/projects/{PROJECT}/zones/{ZONE}/instances/mlinfra-{RUN}-node-{i}" for i in (0, 1)]
    assert gcp_cloud.nodes(RUN) == [] and len(gcp_cloud.nodes(OTHER)) == 1
    assert stopped.stopped_at is not None and stopped.stopped_at.endswith("Z")


def test_stop_compute_with_nothing_left_cannot_say_when(gcp, gcp_cloud):
    assert gcp_cloud.stop_compute(RUN).stopped_at is None and gcp_cloud.stop_compute(RUN).instance_ids == ()


def test_export_steps_start_run_then_succeed_into_the_runs_checkpoints(gcp, gcp_cloud):
    name = seed_run(gcp)
    since = (datetime.now(timezone.utc) - timedelta(seconds=1)).isoformat().replace("+00:00", "Z")
    first = gcp_cloud.export_checkpoints(RUN, since)
    assert first.state == "started"
    request = next(op["request"] for op in gcp.lustre_operations.values())
    assert request.pop("requestId")  # a fresh UUID: a retried POST is not a second export
    assert request == {"lustrePath": {"path": "/checkpoints"}, "gcsPath": {"uri": f"gs://{BUCKET}/checkpoints/{RUN}/"}}
    assert [gcp_cloud.export_checkpoints(RUN, since).state for _ in range(2)] == ["running", "succeeded"]
    posts = [path for method, path, _, _ in gcp.requests if method == "POST"]
    assert posts == [f"/lustre/v1/{name}:exportData"]  # one export, then only waiting


def test_an_export_that_ended_before_compute_stopped_does_not_count(gcp, gcp_cloud):
    name = seed_run(gcp)
    stopped = datetime.now(timezone.utc)
    gcp.add_lustre_operation(name, "EXPORT", stopped - timedelta(minutes=5))  # a node may still have written
    gcp.add_lustre_operation(name, "IMPORT", stopped + timedelta(minutes=1))  # not an export
    assert gcp_cloud.export_checkpoints(RUN, stopped.isoformat()).state == "started"


def test_an_export_after_compute_stopped_counts_even_if_another_object_started_it(gcp, gcp_cloud):
    name = seed_run(gcp)
    stopped = datetime.now(timezone.utc) - timedelta(minutes=10)
    gcp.add_lustre_operation(name, "EXPORT", stopped + timedelta(minutes=2))
    status = gcp_cloud.export_checkpoints(RUN, stopped.isoformat())
    assert status.state == "succeeded" and not [m for m, *_ in gcp.requests if m == "POST"]


def test_a_failed_export_of_its_own_is_reported_with_googles_message(gcp, gcp_cloud):
    seed_run(gcp)
    gcp.export.outcomes = ["failed"]
    gcp.export.polls = 1
    assert gcp_cloud.export_checkpoints(RUN).state == "started"
    failed = gcp_cloud.export_checkpoints(RUN)
    assert failed.state == "failed" and failed.detail == "export failed: 3 files not copied"


def test_a_file_system_being_deleted_is_not_gone_and_none_left_is_said(gcp, gcp_cloud):
    assert gcp_cloud.export_checkpoints(RUN).state == "no-filesystem"
    gcp.add_file_system(ZONE, f"mlinfra-{RUN}", {LABEL: RUN}, state="DELETING")
    assert gcp_cloud.export_checkpoints(RUN).state == "deleting"


def test_the_stacks_file_system_is_looked_up_by_name_when_no_label_matches(gcp, gcp_cloud):
    name = gcp.add_file_system(ZONE, f"mlinfra-{RUN}", {LABEL: "someone-relabelled-it"})
    assert gcp_cloud.export_checkpoints(RUN).state == "no-filesystem"
    gcp_cloud.expect_file_systems([name])
    assert gcp_cloud.export_checkpoints(RUN).state == "started"


def test_audit_finds_what_the_run_left_by_label_and_by_name_and_nothing_of_other_runs(gcp, gcp_cloud):
    seed_run(gcp, nodes=1)
    seed_run(gcp, OTHER, nodes=1)
    prefix = f"mlinfra-{RUN}"
    gcp.add_global("networks", f"{prefix}-gpunet-1")
    gcp.add_global("networks", f"mlinfra-{OTHER}-net")
    gcp.add_global("firewalls", f"{prefix}-internal")
    gcp.add_global("addresses", f"{prefix}-lustre")
    gcp.add_regional("subnetworks", "us-central1", f"{prefix}-sub")
    gcp.add_regional("routers", "us-central1", f"{prefix}-router")
    gcp.add_regional("resourcePolicies", "us-central1", f"{prefix}-compact")
    gcp.add_regional("subnetworks", "us-central1", "default")
    gcp.assets += [{"name": f"//storage.googleapis.com/projects/_/buckets/{prefix}-scratch", "assetType":
                    "storage.googleapis.com/Bucket", "labels": {LABEL: RUN}},
                   {"name": f"//compute.googleapis.com/projects/{PROJECT}/zones/{ZONE}/instances/{prefix}-node-0",
                    "assetType": "compute.googleapis.com/Instance", "labels": {LABEL: RUN}}]
    found = {(leftover.kind, leftover.identifier.rsplit("/", 1)[-1], leftover.found_by) for leftover in gcp_cloud.audit(RUN)}
    assert found == {
        ("compute:instance", f"{prefix}-node-0", "compute-labels"), ("compute:disk", f"{prefix}-node-0", "compute-labels"),
        ("lustre:instance", prefix, "lustre-labels"), ("compute:networks", f"{prefix}-gpunet-1", "compute-names"),
        ("compute:firewalls", f"{prefix}-internal", "compute-names"), ("compute:addresses", f"{prefix}-lustre", "compute-names"),
        ("compute:subnetworks", f"{prefix}-sub", "compute-names"), ("compute:routers", f"{prefix}-router", "compute-names"),
        ("compute:resourcePolicies", f"{prefix}-compact", "compute-names"),
        # the inventory's copy of the instance is not reported twice; what only the inventory knows is
        ("storage.googleapis.com/Bucket", f"{prefix}-scratch", "asset-inventory"),
    }


def test_a_clean_project_audits_clean(gcp, gcp_cloud):
    seed_run(gcp, OTHER)
    assert gcp_cloud.audit(RUN) == []


def test_google_errors_carry_status_and_reason(gcp, gcp_cloud):
    gcp.fail_next.append((403, "PERMISSION_DENIED", "Permission 'compute.instances.list' denied"))
    with pytest.raises(GcpApiError) as raised:
        gcp_cloud.active_nodes(RUN)
    assert (raised.value.status, str(raised.value)) == (403, "PERMISSION_DENIED: Permission 'compute.instances.list' denied")


def test_object_names_are_escaped(gcp, gcp_cloud):
    put_object(gcp.storage, "runs/a b/_SUCCESS", b"{}")
    assert gcp_cloud.api.object_media(BUCKET, "runs/a b/_SUCCESS") == b"{}"


def test_a_running_import_is_waited_for_before_any_export(gcp, gcp_cloud):
    name = seed_run(gcp)
    gcp.add_lustre_operation(name, "IMPORT", datetime.now(timezone.utc), done=False)
    status = gcp_cloud.export_checkpoints(RUN)
    assert (status.state, status.detail) == ("running", f"import of {name} in progress")
    assert not [m for m, *_ in gcp.requests if m == "POST"]  # a second transfer would be ABORTED
