"""Teardown against the recording stand-ins: order of operations, resumability, retries, refusals."""

from __future__ import annotations

import pytest

from infra.ops.lifecycle.ports import Leftover, Marker
from infra.ops.lifecycle.teardown import AuditRetry, Backoff, teardown, transient_destroy_failure
from infra.training.limits import EXPORT_POLL_SECONDS, EXPORT_WAIT_SECONDS
from tests.infra.ops.lifecycle.recording import (
    BUCKET,
    DEPENDENCY_VIOLATION,
    PLACEMENT_GROUP_IN_USE,
    RUN_ID,
    STOPPED_AT,
    FakeClock,
    RecordingCloud,
    RecordingStacks,
    World,
    deployed_world,
    deployment_marker,
    printed,
    runtime,
)

STACK = "training-demo"
SINCE = STOPPED_AT  # AWS's time of the last instance's stop, not the local clock (10:00:30)


def tear(world: World, clock: FakeClock | None = None, **kwargs):
    clock = clock or FakeClock()
    rt = runtime(clock)
    code = teardown(STACK, RecordingStacks(world), RecordingCloud(world), rt, run_id=RUN_ID, **kwargs)
    return code, printed(rt), clock


def test_a_clean_teardown_stops_exports_destroys_audits_then_removes():
    world = deployed_world()
    code, lines, clock = tear(world)
    assert code == 0
    assert world.calls == [
        ("exists", STACK),
        ("config", STACK),
        ("outputs", STACK),
        ("stop_compute", RUN_ID),
        ("marker", BUCKET, RUN_ID),
        ("export_checkpoints", RUN_ID, SINCE, "started"),
        ("export_checkpoints", RUN_ID, SINCE, "running"),
        ("export_checkpoints", RUN_ID, SINCE, "succeeded"),
        ("file_system_busy", RUN_ID),
        ("destroy", STACK),
        ("audit", RUN_ID),
        ("remove", STACK),
    ]
    assert clock.sleeps == [EXPORT_POLL_SECONDS, EXPORT_POLL_SECONDS]
    assert world.stacks == {} and world.instances[RUN_ID] == 0 and world.filesystems == set()
    assert lines[0] == f"stack {STACK}: run {RUN_ID}, bucket {BUCKET}"
    assert lines[1] == f"compute: terminated 4 instance(s) of run {RUN_ID}"
    assert lines[-4:] == [
        "checkpoints: exported to the registry (task task-0123)",
        f"destroy: stack {STACK} holds no resources",
        f"audit: nothing left with run id {RUN_ID}",
        f"stack {STACK}: removed (its file in stacks/ is kept)",
    ]


CLEAN_CALLS = 11  # the clean teardown above


def _destroyed_only_after_export(calls: list[tuple]) -> bool:
    """Every destroy that went through came after an export had succeeded (or nothing was left to export)."""
    safe = False
    for call in calls:
        if call[0] == "export_checkpoints" and call[3] in ("succeeded", "no-filesystem"):
            safe = True
        if call[0] == "destroy" and not safe:
            return False
    return True


# (export states, calls of an uninterrupted teardown): exporting itself; waiting for the guard's deletion
INTERRUPTIONS = [(["started", "running", "succeeded"], step) for step in range(1, CLEAN_CALLS + 1)] + [
    (["deleting", "no-filesystem"], step) for step in range(1, CLEAN_CALLS)
]


@pytest.mark.parametrize(
    "export_states, step",
    INTERRUPTIONS,
    ids=[f"{'export' if states[0] == 'started' else 'guard-deleting'}-{step}" for states, step in INTERRUPTIONS],
)
def test_teardown_interrupted_after_any_step_finishes_when_run_again(export_states, step):
    world = deployed_world(interrupt_after=step, export_states=list(export_states))
    with pytest.raises(KeyboardInterrupt):
        tear(world)
    assert len(world.calls) == step
    world.interrupt_after = None
    code, lines, _ = tear(world)
    assert code == 0, lines
    assert STACK not in world.stacks
    assert world.instances[RUN_ID] == 0 and RUN_ID not in world.filesystems
    assert world.calls[-1] in (("remove", STACK), ("audit", RUN_ID))
    assert _destroyed_only_after_export(world.calls)


def test_resumed_after_destroy_finds_no_file_system_and_finishes():
    world = deployed_world(interrupt_after=10)  # right after the destroy
    with pytest.raises(KeyboardInterrupt):
        tear(world)
    world.interrupt_after, world.calls = None, []
    code, lines, _ = tear(world)
    assert code == 0
    assert world.names() == [
        "exists",
        "config",
        "outputs",
        "stop_compute",
        "export_checkpoints",
        "file_system_busy",
        "destroy",
        "audit",
        "remove",
    ]
    assert "bucket unknown (no outputs)" in lines[0]
    assert "checkpoints: no file system left to export from" in lines


def test_a_removed_stack_is_only_audited():
    world = World()
    code, lines, _ = tear(world)
    assert code == 0
    assert world.calls == [("exists", STACK), ("audit", RUN_ID)]
    assert lines[0] == f"stack {STACK}: already removed; auditing run {RUN_ID}"


@pytest.mark.parametrize("failure", [DEPENDENCY_VIOLATION, PLACEMENT_GROUP_IN_USE])
def test_transient_destroy_failures_are_retried_with_exponential_backoff(failure):
    world = deployed_world(destroy_failures=[failure, failure], export_states=["succeeded"])
    code, lines, clock = tear(world)
    assert code == 0
    assert world.names().count("destroy") == 3
    assert clock.sleeps == [30, 60]
    assert world.names()[-2:] == ["audit", "remove"]
    code_name = failure.split("api error ")[1].split(":")[0]
    assert [line for line in lines if line.startswith("destroy:")][:2] == [
        f"destroy: {transient_destroy_failure(failure)}; retrying in 30s (attempt 2 of 8)",
        f"destroy: {transient_destroy_failure(failure)}; retrying in 1m 00s (attempt 3 of 8)",
    ]
    assert code_name in lines[-4]


def test_retries_give_up_after_the_last_attempt_and_keep_the_stack():
    world = deployed_world(destroy_failures=[DEPENDENCY_VIOLATION] * 5, export_states=["succeeded"])
    code, lines, clock = tear(world, backoff=Backoff(attempts=3, first_seconds=10, factor=3))
    assert code == 1
    assert world.names().count("destroy") == 3 and "audit" not in world.names() and "remove" not in world.names()
    assert clock.sleeps == [10, 30]
    assert lines[-1].startswith("destroy: still failing after 3 attempts (DependencyViolation:")


def test_any_other_destroy_failure_stops_at_once():
    failure = (
        "error: deleting urn:...:aws:fsx/lustreFileSystem:LustreFileSystem::run-fs: AccessDeniedException: not allowed"
    )
    world = deployed_world(destroy_failures=[failure], export_states=["succeeded"])
    code, lines, clock = tear(world)
    assert code == 1
    assert world.names().count("destroy") == 1 and world.names()[-1] == "destroy"
    assert clock.sleeps == []
    assert lines[-1] == f"destroy: failed: {failure}; the stack is kept"


LEFTOVERS = [
    Leftover("ec2:network-interface", "eni-0abc", "network-interfaces"),
    Leftover("logs:log-group", "/aws/lambda/run-guard", "log-groups"),
]


def test_leftovers_still_there_after_the_audit_retries_keep_the_stack():
    world = deployed_world(leftovers=LEFTOVERS, export_states=["succeeded"])
    code, lines, clock = tear(world)
    assert code == 1
    assert world.names()[-5:] == ["destroy", "audit", "audit", "audit", "audit"]
    assert clock.sleeps == [60, 90, 150]  # 4 looks over 5 minutes
    assert STACK in world.stacks and "remove" not in world.names()
    assert lines[-6:] == [
        f"audit: 2 resource(s) of run {RUN_ID} still listed, the cloud may still be deleting them; looking again in "
        "1m 00s (look 2 of 4)",
        f"audit: 2 resource(s) of run {RUN_ID} still listed, the cloud may still be deleting them; looking again in "
        "1m 30s (look 3 of 4)",
        f"audit: 2 resource(s) of run {RUN_ID} still listed, the cloud may still be deleting them; looking again in "
        "2m 30s (look 4 of 4)",
        f"audit: 2 resource(s) still belong to run {RUN_ID}; stack {STACK} is kept:",
        "  ec2:network-interface  eni-0abc  (found by network-interfaces)",
        "  logs:log-group  /aws/lambda/run-guard  (found by log-groups)",
    ]


def test_resources_aws_is_still_deleting_right_after_the_destroy_are_not_leftovers():
    world = deployed_world(leftovers=LEFTOVERS, leftovers_for=2, export_states=["succeeded"])
    code, lines, clock = tear(world, audit_retry=AuditRetry(pauses=(5, 10, 20)))
    assert code == 0, lines
    assert world.names()[-5:] == ["destroy", "audit", "audit", "audit", "remove"]
    assert clock.sleeps == [5, 10]
    assert STACK not in world.stacks
    assert f"audit: nothing left with run id {RUN_ID}" in lines


def test_a_removed_stack_with_leftovers_is_audited_with_the_same_retries():
    world = World(leftovers=LEFTOVERS, leftovers_for=1)
    code, lines, clock = tear(world)
    assert code == 0
    assert world.calls == [("exists", STACK), ("audit", RUN_ID), ("audit", RUN_ID)]
    assert clock.sleeps == [60]


def test_a_failed_export_destroys_nothing():
    world = deployed_world(
        export_states=["started", "failed"], export_detail="FSx task FAILED: access denied to bucket"
    )
    code, lines, _ = tear(world)
    assert code == 1
    assert "destroy" not in world.names()
    assert RUN_ID in world.filesystems and STACK in world.stacks
    assert lines[-1] == (
        "checkpoints: export failed (task task-0123): FSx task FAILED: access denied to bucket; "
        f"nothing was destroyed, fix it and run `python -m infra teardown --stack {STACK}` again"
    )


def test_an_export_that_does_not_finish_in_time_destroys_nothing():
    world = deployed_world(export_states=["running"])
    code, lines, clock = tear(world)
    assert code == 1
    assert "destroy" not in world.names()
    assert sum(clock.sleeps) == EXPORT_WAIT_SECONDS
    assert "run `python -m infra teardown --stack training-demo` again to keep waiting" in lines[-1]


def test_with_no_stop_time_from_aws_the_export_counts_from_local_now():
    world = deployed_world(stopped_at=None, export_states=["succeeded"])
    assert tear(world)[0] == 0
    (call,) = [call for call in world.calls if call[0] == "export_checkpoints"]
    assert call == ("export_checkpoints", RUN_ID, "2026-03-01T10:00:30Z", "succeeded")  # never earlier than now


def test_a_file_system_the_guard_is_deleting_is_waited_for_before_the_destroy():
    world = deployed_world(export_states=["deleting", "deleting", "no-filesystem"])
    code, lines, clock = tear(world)
    assert code == 0, lines
    assert [call[3] for call in world.calls if call[0] == "export_checkpoints"] == [
        "deleting",
        "deleting",
        "no-filesystem",
    ]
    names = world.names()
    assert names.index("destroy") > max(i for i, name in enumerate(names) if name == "export_checkpoints")
    assert clock.sleeps == [EXPORT_POLL_SECONDS, EXPORT_POLL_SECONDS]
    assert lines[2:5] == [
        "checkpoints: exported; the file system is being deleted, 0s so far",
        "checkpoints: exported; the file system is being deleted, 1m 00s so far",
        "checkpoints: no file system left to export from",
    ]


def test_a_file_system_that_stays_deleting_past_the_export_wait_destroys_nothing():
    world = deployed_world(export_states=["running", "deleting"])
    code, lines, clock = tear(world)
    assert code == 1
    assert "destroy" not in world.names() and STACK in world.stacks
    assert sum(clock.sleeps) == EXPORT_WAIT_SECONDS
    assert lines[-1] == (
        f"checkpoints: exported; the file system is being deleted, still after 1h 00m; nothing was destroyed, "
        f"run `python -m infra teardown --stack {STACK}` again to keep waiting"
    )


def test_checkpoints_exported_by_the_nodes_need_no_export():
    world = deployed_world()
    world.markers[RUN_ID] = deployment_marker("SUCCESS", exit_code=0, checkpoints_exported=True)
    code, lines, _ = tear(world)
    assert code == 0
    assert "export_checkpoints" not in world.names()
    assert f"checkpoints: exported by the nodes (runs/{RUN_ID}/_SUCCESS)" in lines


@pytest.mark.parametrize(
    "marker",
    [
        deployment_marker("SUCCESS", "2026-02-01T08:00:00Z", exit_code=0, checkpoints_exported=True),  # earlier run
        Marker("SUCCESS", exit_code=0, checkpoints_exported=True),  # nodes that did not say which deployment
    ],
)
def test_a_marker_another_deployment_wrote_does_not_stand_for_this_ones_export(marker):
    """A run id deployed again (pulumi up past `run`'s check) finds the earlier deployment's _SUCCESS: trusting
    it would destroy this deployment's checkpoints unexported."""
    world = deployed_world(export_states=["succeeded"])
    world.markers[RUN_ID] = marker
    code, lines, _ = tear(world)
    assert code == 0 and _destroyed_only_after_export(world.calls)
    assert any(line.startswith(f"checkpoints: runs/{RUN_ID}/_SUCCESS is not this deployment's") for line in lines)


def test_a_failed_run_still_has_its_checkpoints_exported():
    world = deployed_world(export_states=["succeeded"])
    world.markers[RUN_ID] = Marker("FAILED", exit_code=1, checkpoints_exported=False)
    assert tear(world)[0] == 0
    assert world.names().index("export_checkpoints") < world.names().index("destroy")


def test_export_is_skipped_when_the_stack_does_not_export_checkpoints():
    world = deployed_world()
    world.stacks[STACK].config["mlinfra:training"]["lifecycle"]["exportCheckpoints"] = False
    code, lines, _ = tear(world)
    assert code == 0
    assert "export_checkpoints" not in world.names() and "marker" not in world.names()
    assert "checkpoints: not exported (exportCheckpoints is false)" in lines


def test_phases_are_announced():
    phases = []
    tear(deployed_world(export_states=["succeeded"]), on_phase=phases.append)
    assert phases == ["tearing down", "exporting", "tearing down"]


@pytest.mark.parametrize(
    "output, transient",
    [
        (DEPENDENCY_VIOLATION, True),
        (PLACEMENT_GROUP_IN_USE, True),
        (
            "error: deleting urn:...gcp:compute/network:Network::run-vpc: Error 400: The network resource "
            "'projects/p/global/networks/mlinfra-r-net' is already being used by 'projects/p/global/firewalls/"
            "mlinfra-r-internal', resourceInUseByAnotherResource",
            True,
        ),
        (
            "error: Error waiting for Delete Service Networking Connection: Error code 9, message: Failed to delete "
            "connection; Producer services (e.g. CloudSQL, Cloud Memstore, etc.) are still using this connection.",
            True,
        ),
        ("error: googleapi: Error 403: Required 'compute.networks.delete' permission, forbidden", False),
        ("error: AccessDenied: not authorized to perform ec2:DeleteVpc", False),
        ("error: the stack is currently locked by 1 lock(s)", False),
        ("", False),
    ],
)
def test_transient_destroy_failures_are_classified_from_the_engine_output(output, transient):
    assert (transient_destroy_failure(output) is not None) is transient


def test_backoff_doubles_up_to_its_ceiling():
    backoff = Backoff()
    assert [backoff.delay(n) for n in range(1, 8)] == [30, 60, 120, 240, 300, 300, 300]


def test_the_engine_output_of_the_destroy_is_shown_indented():
    class Talking(RecordingStacks):
        def destroy(self, stack, on_output):
            on_output(f"Destroying ({stack}):")
            on_output("")
            super().destroy(stack, on_output)

    world = deployed_world(export_states=["succeeded"])
    rt = runtime(FakeClock())
    assert teardown(STACK, Talking(world), RecordingCloud(world), rt) == 0
    lines = printed(rt)
    assert lines[lines.index(f"  Destroying ({STACK}):") + 1] == f"destroy: stack {STACK} holds no resources"


def test_the_stacks_own_file_system_id_reaches_the_cloud_side():
    world = deployed_world(export_states=["succeeded"])
    world.stacks[STACK].outputs["lustreFileSystemId"] = "fs-0123456789abcdef0"
    cloud = RecordingCloud(world)
    assert teardown(STACK, RecordingStacks(world), cloud, runtime(FakeClock())) == 0
    assert cloud.expected_file_systems == ("fs-0123456789abcdef0",)


def test_a_file_system_the_outputs_name_but_the_cloud_does_not_find_stops_the_teardown():
    """Deployed in us-east-2, the stack file later says us-east-1: the file system is "not found" where the
    teardown looks. That is never "nothing to export": nothing is destroyed and the stack is kept."""
    world = deployed_world(export_states=["missing"])
    world.stacks[STACK].config["aws:region"] = "us-east-1"
    world.stacks[STACK].outputs.update(region="us-east-2", lustreFileSystemId="fs-0123")
    code, lines, _ = tear(world)
    assert code == 1
    assert "destroy" not in world.names() and "remove" not in world.names()
    assert ("holds", STACK, ("fs-0123",)) in world.calls
    assert f"stack {STACK}: deployed in us-east-2, its file now says aws:region us-east-1; acting in us-east-2" in lines
    assert lines[-1].endswith(
        "nothing was destroyed: check the region and account the stack was deployed to, then run "
        f"`python -m infra teardown --stack {STACK}` again"
    )


def test_a_missing_file_system_that_the_stack_no_longer_holds_was_destroyed_with_it():
    world = deployed_world(export_states=["missing"], state_holds_file_system=False)
    world.stacks[STACK].outputs.update(lustreFileSystemId="fs-0123")
    code, lines, _ = tear(world)
    assert code == 0
    assert "checkpoints: file system fs-0123 already destroyed with the stack" in lines
    assert world.names()[-3:] == ["destroy", "audit", "remove"]


def test_a_repository_task_or_a_deleting_file_system_is_waited_for_before_the_destroy():
    """The nodes exported the checkpoints, so teardown needs no export, but the run guard may still have a task
    pending (DeleteFileSystem then fails with BadRequest, which the destroy does not retry) or be deleting the
    file system: the destroy waits for both."""
    world = deployed_world()
    world.markers[RUN_ID] = deployment_marker("SUCCESS", exit_code=0, checkpoints_exported=True)
    world.busy_plan = [
        "data repository task task-9 (EXPORT_TO_REPOSITORY) is PENDING on file system fs-1",
        "file system fs-1 is being deleted",
    ]
    code, lines, clock = tear(world)
    assert code == 0
    assert world.names()[-6:] == [
        "file_system_busy",
        "file_system_busy",
        "file_system_busy",
        "destroy",
        "audit",
        "remove",
    ]
    assert clock.sleeps == [EXPORT_POLL_SECONDS, EXPORT_POLL_SECONDS]
    assert (
        "file system: data repository task task-9 (EXPORT_TO_REPOSITORY) is PENDING on file system fs-1; "
        "waiting before the destroy, 0s so far"
    ) in lines


def test_a_file_system_still_busy_past_the_export_wait_destroys_nothing():
    world = deployed_world()
    world.markers[RUN_ID] = deployment_marker("SUCCESS", exit_code=0, checkpoints_exported=True)
    world.busy_plan = ["file system fs-1 is being deleted"] * (EXPORT_WAIT_SECONDS // EXPORT_POLL_SECONDS + 2)
    code, lines, _ = tear(world)
    assert code == 1 and "destroy" not in world.names() and STACK in world.stacks
    assert lines[-1] == (
        "file system: file system fs-1 is being deleted, still after 1h 00m; nothing was destroyed, "
        f"run `python -m infra teardown --stack {STACK}` again to keep waiting"
    )


def test_a_file_system_never_linked_is_destroyed_with_nothing_to_export():
    """The cloud side found no data repository linked (test_aws_run_cloud.py: the launcher died while FSx created
    the file system): teardown destroys instead of waiting on an export FSx would refuse."""
    world = deployed_world(
        export_states=["nothing-linked"],
        export_detail="file system fs-0123 has no data repository linked (no association, no export path): nothing "
        "to export",
    )
    code, lines, _ = tear(world)
    assert code == 0 and "destroy" in world.names()
    assert (
        "checkpoints: none to export (file system fs-0123 has no data repository linked (no association, no export "
        "path): nothing to export); the destroy deletes it"
    ) in lines


def test_instances_that_outlast_the_stop_wait_end_the_teardown_with_a_line_not_a_traceback():
    world = deployed_world()
    world.compute_stays = True
    code, lines, _ = tear(world)
    assert code == 1 and "destroy" not in world.names() and "export_checkpoints" not in world.names()
    assert lines[-1] == (
        f"compute: instances of run {RUN_ID} still not terminated 600 s after their termination was asked; nothing "
        f"else was changed; run `python -m infra teardown --stack {STACK}` again"
    )
