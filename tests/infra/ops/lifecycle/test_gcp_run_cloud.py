"""`GcpRunCloud` against local emulators (tests/infra/ops/lifecycle/gcp_world.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from run_guard_gcp.api import GcpApiError
from tests.infra.ops.lifecycle.gcp_world import BUCKET, LABEL, OTHER, PROJECT, RUN, ZONE, put_object, seed_run


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
    since = (datetime.now(UTC) - timedelta(seconds=1)).isoformat().replace("+00:00", "Z")
    first = gcp_cloud.export_checkpoints(RUN, since)
    assert first.state == "started"
    request = next(op["request"] for op in gcp.lustre_operations.values())
    assert request.pop("requestId")  # the same for the same export: a retried POST is not a second one
    assert request == {"lustrePath": {"path": "/checkpoints"}, "gcsPath": {"uri": f"gs://{BUCKET}/checkpoints/{RUN}/"}}
    assert [gcp_cloud.export_checkpoints(RUN, since).state for _ in range(2)] == ["running", "succeeded"]
    posts = [path for method, path, _, _ in gcp.requests if method == "POST"]
    assert posts == [f"/lustre/v1/{name}:exportData"]  # one export, then only waiting


DESTINATION = f"gs://{BUCKET}/checkpoints/{RUN}/"


@pytest.mark.parametrize(
    "why, operation",
    [
        ("created before the nodes were gone: a node may still have written", dict(created=-5)),
        ("an import, not an export", dict(transfer="IMPORT", created=1)),
        ("an export of other data", dict(created=1, path="/datasets")),
        ("an export to another place", dict(created=1, uri="gs://elsewhere/checkpoints/")),
        ("an export that left files behind", dict(created=1, failed_files=3)),
        ("an export that ended in error", dict(created=1, error="internal error")),
    ],
)
def test_exports_that_do_not_prove_the_checkpoints_are_out_do_not_count(gcp, gcp_cloud, why, operation):
    name = seed_run(gcp)
    stopped = datetime.now(UTC) - timedelta(minutes=10)
    created = stopped + timedelta(minutes=operation.pop("created"))
    gcp.add_lustre_operation(
        name, operation.pop("transfer", "EXPORT"), created, uri=operation.pop("uri", DESTINATION), **operation
    )
    assert gcp_cloud.export_checkpoints(RUN, stopped.isoformat()).state == "started", why


def test_an_export_after_compute_stopped_counts_even_if_another_object_started_it(gcp, gcp_cloud):
    name = seed_run(gcp)
    stopped = datetime.now(UTC) - timedelta(minutes=10)
    gcp.add_lustre_operation(name, "EXPORT", stopped + timedelta(minutes=2), uri=DESTINATION)
    status = gcp_cloud.export_checkpoints(RUN, stopped.isoformat())
    assert status.state == "succeeded" and not [m for m, *_ in gcp.requests if m == "POST"]


def test_another_file_systems_export_in_the_same_zone_does_not_count(gcp, gcp_cloud):
    seed_run(gcp)
    other = gcp.add_file_system(ZONE, "someone-elses", {})
    stopped = datetime.now(UTC) - timedelta(minutes=10)
    gcp.add_lustre_operation(other, "EXPORT", stopped + timedelta(minutes=2), uri=DESTINATION)
    assert gcp_cloud.export_checkpoints(RUN, stopped.isoformat()).state == "started"


def test_exports_of_a_file_system_not_yet_active_or_not_the_only_one(gcp, gcp_cloud):
    name = gcp.add_file_system(ZONE, f"mlinfra-{RUN}", {LABEL: RUN}, state="CREATING")
    assert gcp_cloud.export_checkpoints(RUN).state == "no-filesystem"  # never ACTIVE: nothing written
    gcp.file_systems[name]["state"] = "REPAIRING"
    status = gcp_cloud.export_checkpoints(RUN)
    assert status.state == "failed" and "is REPAIRING" in status.detail
    gcp.file_systems[name]["state"] = "ACTIVE"
    gcp.add_file_system(ZONE, f"mlinfra-{RUN}-second", {LABEL: RUN})
    assert gcp_cloud.export_checkpoints(RUN).state == "failed"


def test_a_failed_export_of_its_own_is_reported_with_googles_message(gcp, gcp_cloud):
    seed_run(gcp)
    gcp.export.outcomes = ["failed"]
    gcp.export.polls = 1
    assert gcp_cloud.export_checkpoints(RUN).state == "started"
    failed = gcp_cloud.export_checkpoints(RUN)
    assert failed.state == "failed" and failed.detail == "export failed: 3 files not copied"
    assert gcp_cloud.export_checkpoints(RUN).state == "failed"  # not started again behind the user's back


def test_a_file_system_being_deleted_is_not_gone_and_none_left_is_said(gcp, gcp_cloud):
    assert gcp_cloud.export_checkpoints(RUN).state == "no-filesystem"
    gcp.add_file_system(ZONE, f"mlinfra-{RUN}", {LABEL: RUN}, state="DELETING")
    assert gcp_cloud.export_checkpoints(RUN).state == "deleting"


def test_a_file_system_is_found_by_its_runs_name_or_the_stacks_record_when_no_label_matches(gcp, gcp_cloud):
    gcp.add_file_system(ZONE, f"mlinfra-{RUN}", {LABEL: "someone-relabelled-it"})
    assert [fs["name"].rsplit("/", 1)[-1] for fs in gcp_cloud.file_systems(RUN)] == [f"mlinfra-{RUN}"]
    gcp.file_systems.clear()
    legacy = gcp.add_file_system(ZONE, "named-otherwise", {})
    assert gcp_cloud.export_checkpoints(RUN).state == "no-filesystem"
    gcp_cloud.expect_file_systems([legacy])  # the stack's outputs name it
    assert gcp_cloud.export_checkpoints(RUN).state == "started"


def test_an_instance_the_outputs_name_but_the_project_lacks_is_missing_not_gone(gcp, gcp_cloud):
    gcp_cloud.expect_file_systems([f"projects/{PROJECT}/locations/{ZONE}/instances/mlinfra-{RUN}"])
    missing = gcp_cloud.export_checkpoints(RUN)
    assert missing.state == "missing" and f"project {PROJECT}" in missing.detail


def test_audit_finds_what_the_run_left_by_label_and_by_name_and_nothing_of_other_runs(gcp, gcp_cloud):
    seed_run(gcp, nodes=1)
    seed_run(gcp, OTHER, nodes=1)
    seed_run(gcp, f"{RUN}-2", nodes=1)  # a run whose id starts with this one's
    prefix = f"mlinfra-{RUN}"
    gcp.add_global("networks", f"{prefix}-gpunet-1")
    gcp.add_global("networks", f"mlinfra-{OTHER}-net")
    gcp.add_global("networks", f"{prefix}-2-net")
    gcp.service_accounts.add(f"train-{RUN}@{PROJECT}.iam.gserviceaccount.com")
    gcp.add_global("firewalls", f"{prefix}-internal")
    gcp.add_global("addresses", f"{prefix}-lustre")
    gcp.add_regional("subnetworks", "us-central1", f"{prefix}-sub")
    gcp.add_regional("routers", "us-central1", f"{prefix}-router")
    gcp.add_regional("resourcePolicies", "us-central1", f"{prefix}-compact")
    gcp.add_regional("subnetworks", "us-central1", "default")
    gcp.assets += [
        {
            "name": f"//storage.googleapis.com/projects/_/buckets/{prefix}-scratch",
            "assetType": "storage.googleapis.com/Bucket",
            "labels": {LABEL: RUN},
        },
        {
            "name": f"//compute.googleapis.com/projects/{PROJECT}/zones/{ZONE}/instances/{prefix}-node-0",
            "assetType": "compute.googleapis.com/Instance",
            "labels": {LABEL: RUN},
        },
    ]
    found = {
        (leftover.kind, leftover.identifier.rsplit("/", 1)[-1], leftover.found_by) for leftover in gcp_cloud.audit(RUN)
    }
    assert found == {
        ("compute:instance", f"{prefix}-node-0", "compute-labels"),
        ("compute:disk", f"{prefix}-node-0", "compute-labels"),
        ("lustre:instance", prefix, "lustre"),
        ("compute:network", f"{prefix}-gpunet-1", "compute-names"),
        ("compute:firewall", f"{prefix}-internal", "compute-names"),
        ("compute:global-address", f"{prefix}-lustre", "compute-names"),
        ("compute:subnetwork", f"{prefix}-sub", "compute-names"),
        ("compute:router", f"{prefix}-router", "compute-names"),
        ("compute:resource-policy", f"{prefix}-compact", "compute-names"),
        ("iam:service-account", f"train-{RUN}@{PROJECT}.iam.gserviceaccount.com", "iam"),
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
    assert (raised.value.status, str(raised.value)) == (
        403,
        "PERMISSION_DENIED: Permission 'compute.instances.list' denied",
    )


def test_object_names_are_escaped(gcp, gcp_cloud):
    put_object(gcp.storage, "runs/a b/_SUCCESS", b"{}")
    assert gcp_cloud.api.object_media(BUCKET, "runs/a b/_SUCCESS") == b"{}"


def test_a_running_import_is_waited_for_before_any_export(gcp, gcp_cloud):
    name = seed_run(gcp)
    gcp.add_lustre_operation(name, "IMPORT", datetime.now(UTC), done=False)
    status = gcp_cloud.export_checkpoints(RUN)
    assert (status.state, status.detail) == ("running", f"import of {name} in progress")
    assert not [m for m, *_ in gcp.requests if m == "POST"]  # a second transfer would be ABORTED


def test_a_zone_that_cannot_be_read_is_an_error_not_an_empty_list(gcp, gcp_cloud):
    seed_run(gcp)
    gcp.unreachable_zones.append("us-central1-b")
    with pytest.raises(GcpApiError, match="UNREACHABLE: part of the list could not be read: zones/us-central1-b"):
        gcp_cloud.stop_compute(RUN)
    assert not [m for m, *_ in gcp.requests if m == "DELETE"]


def test_nodes_already_being_deleted_are_waited_for_not_an_error(gcp, gcp_cloud):
    seed_run(gcp, nodes=2)
    first = gcp_cloud.stop_compute  # Compute Engine's own deletion at terminationTime is under way
    gcp.deleting[(ZONE, f"mlinfra-{RUN}-node-0")] = 3
    gcp.instances[(ZONE, f"mlinfra-{RUN}-node-0")]["status"] = "STOPPING"
    stopped = first(RUN)
    assert stopped.instance_ids == (f"mlinfra-{RUN}-node-1",) and gcp_cloud.nodes(RUN) == []


def test_a_failed_delete_is_reported_at_once_with_googles_words(gcp, gcp_cloud):
    seed_run(gcp, nodes=1)
    gcp.failing_deletes[f"mlinfra-{RUN}-node-0"] = "Required 'compute.instances.delete' permission"
    with pytest.raises(GcpApiError, match="PERMISSION_DENIED: deleting .*node-0: Required 'compute.instances.delete'"):
        gcp_cloud.stop_compute(RUN)


def test_the_file_system_named_for_the_run_is_found_even_without_its_label(gcp):
    import requests

    from infra.ops.lifecycle.gcp.cloud import GcpRunCloud
    from run_guard_gcp.api import GcpApi

    name = gcp.add_file_system(ZONE, f"mlinfra-{RUN}", {})
    cloud = GcpRunCloud(
        PROJECT, BUCKET, api=GcpApi(requests.Session(), gcp.endpoints), sleep=lambda s: None, lustre_instances=[name]
    )
    assert cloud.export_checkpoints(RUN).state == "started"


def test_throttling_and_server_errors_are_retried_on_the_default_session(gcp, monkeypatch):
    import requests
    from urllib3.util.retry import Retry

    from run_guard_gcp.api import GcpApi, with_retries

    # The backoff urllib3 would sleep before each retry, recorded instead of slept (4 s of the suite's wall time).
    backoffs: list[float] = []
    monkeypatch.setattr(Retry, "_sleep_backoff", lambda retry: backoffs.append(retry.get_backoff_time()))
    gcp.fail_next += [(503, "UNAVAILABLE", "try again"), (429, "RESOURCE_EXHAUSTED", "rate limit")]
    api = GcpApi(with_retries(requests.Session()), gcp.endpoints)
    assert api.get("compute", f"projects/{PROJECT}/aggregated/instances")["items"]
    assert len(gcp.requests) == 3  # two refusals, then the answer
    assert backoffs == [0, 4]  # backoff_factor 2: none after the first error, 2 * 2 ** 1 s after the second
    gcp.fail_next.append((403, "PERMISSION_DENIED", "denied"))
    with pytest.raises(GcpApiError, match="PERMISSION_DENIED"):
        api.get("compute", f"projects/{PROJECT}/aggregated/instances")
    assert len(gcp.requests) == 4  # not retried
