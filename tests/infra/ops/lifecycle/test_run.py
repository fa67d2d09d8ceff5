"""`run`: offline checks first, expires-at fixed once, the wait and its progress, then teardown."""

from __future__ import annotations

import re
import shutil
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from infra.cli import main
from infra.core.errors import InputError
from infra.core.project import ROOT, load_project, stack_config
from infra.kinds import load
from infra.ops.lifecycle.ports import Marker
from infra.ops.lifecycle.run import EXPIRES_AT, fix_expiry, run
from infra.ops.lifecycle.target import run_subject
from infra.ops.progress import StatusLine, Usage, status_text, summary_text
from infra.ops.runtime import Runtime
from tests.infra.ops.lifecycle.recording import (
    BUCKET,
    RUN_ID,
    START,
    FakeClock,
    RecordingCloud,
    RecordingStacks,
    StackState,
    World,
    deployed_outputs,
    deployment_marker,
    printed,
    run_world,
    runtime,
    training_config,
)

STACK = "training-demo"
P4D_PRICE = 21.96
CLEAN_PREVIEW = SimpleNamespace(errors=[])


def clean_preview(stack, overrides, project):
    return CLEAN_PREVIEW


def launch(world: World, clock: FakeClock | None = None, live: bool = False, preview_fn=clean_preview, **kwargs):
    clock = clock or FakeClock()
    rt = runtime(clock, live=live)
    code = run(STACK, RecordingStacks(world), RecordingCloud(world), rt, preview_fn=preview_fn, **kwargs)
    return code, rt, clock


def succeeding_world(polls_before_marker: int = 121, **overrides) -> World:
    """No nodes at the first poll, four from the second on; the marker at poll `polls_before_marker + 1`
    (not before the deploy: the check that the run id has not ended yet finds none)."""
    world = run_world(nodes_plan=[0], markers_after=polls_before_marker + 1, export_states=["succeeded"], **overrides)
    world.instances[RUN_ID] = 4
    world.markers[RUN_ID] = deployment_marker("SUCCESS", exit_code=0, checkpoints_exported=True)
    return world


def _project_with(tmp_path: Path, name: str, training: dict) -> object:
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / "stacks").mkdir()
    config = {
        "aws:region": "us-east-1",
        "mlinfra:kind": "training",
        "mlinfra:registryStack": "registry",
        "mlinfra:training": training,
    }
    (tmp_path / "stacks" / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump({"config": config}), encoding="utf-8")
    return load_project(tmp_path)


def test_a_whole_run_checks_offline_deploys_waits_and_tears_down():
    world = succeeding_world()
    code, rt, clock = launch(world, preview_fn=__import__("infra.tools.offline.engine", fromlist=["preview"]).preview)
    lines = printed(rt)
    assert code == 0, lines
    assert world.names()[:8] == ["exists", "outputs", "marker", "claim", "set_config", "up", "outputs", "marker"]
    assert world.calls[1:5] == [
        ("outputs", "registry"),
        ("marker", BUCKET, RUN_ID),
        ("claim", BUCKET, RUN_ID),
        ("set_config", STACK, EXPIRES_AT, "2026-03-02T10:00:00Z"),
    ]
    assert world.claims[RUN_ID]["stack"] == f"mlinfra/{STACK}"
    waited, teardown_calls = world.names()[7 : 7 + 2 * 122], world.names()[7 + 2 * 122 :]
    assert waited == ["marker", "active_nodes"] * 122
    assert teardown_calls == [
        "exists",
        "config",
        "outputs",
        "stop_compute",
        "marker",
        "file_system_busy",
        "destroy",
        "audit",
        "remove",
    ]
    assert STACK not in world.stacks
    assert lines[-1] == f"run {RUN_ID}: job succeeded; 1h 00m, 4.00 node-h, about $87.84 at the on-demand list price"


def test_progress_lines_when_not_a_terminal():
    world = succeeding_world()
    code, rt, _ = launch(world)
    lines = printed(rt)
    assert lines[:6] == [
        "expires-at: 2026-03-02T10:00:00Z (now + ttlHours 24), written to the stack's config",
        "deploying | 0s | 0 nodes | 0.00 node-h | $0.00 so far",
        f"  Updating ({STACK}):",
        "  Resources: 45 created",
        f"up: deployed run {RUN_ID} (4 x p4d.24xlarge), expires-at 2026-03-02T10:00:00Z",
        "waiting for nodes | 0s | 0 nodes | 0.00 node-h | $0.00 so far",
    ]
    training = [line for line in lines if line.startswith("training |")]
    # a line at the phase change, then one every five minutes: 4 nodes x 5 min = 0.33 node-h = $7.32
    assert training[:3] == [
        "training | 30s | 4 nodes | 0.00 node-h | $0.00 so far",
        "training | 5m 30s | 4 nodes | 0.33 node-h | $7.32 so far",
        "training | 10m 30s | 4 nodes | 0.67 node-h | $14.64 so far",
    ]
    assert len(training) == 12
    assert f"job: ended, runs/{RUN_ID}/_SUCCESS, exit code 0" in lines
    assert "\r" not in rt.stream.getvalue()


def test_progress_is_one_redrawn_line_on_a_terminal():
    world = succeeding_world(polls_before_marker=3)
    code, rt, _ = launch(world, live=True)
    text = rt.stream.getvalue()
    assert code == 0
    assert "\rtraining | 1m 00s | 4 nodes | 0.03 node-h | $0.73 so far" in text
    # a persistent line first erases the status it replaces
    assert re.search(rf"\r {{60,}}\rup: deployed run {RUN_ID}", text)


def test_usage_integrates_active_nodes_over_time_and_prices_them():
    t0 = START
    usage = Usage().sample(t0, 4).sample(t0 + timedelta(hours=1), 2).sample(t0 + timedelta(hours=1, minutes=30), 0)
    assert usage.node_hours == pytest.approx(5.0)
    usage = usage.sample(t0 + timedelta(hours=9), 0)
    assert usage.node_hours == pytest.approx(5.0)
    assert usage.cost(P4D_PRICE) == pytest.approx(109.8)
    assert usage.cost(None) is None
    assert (
        status_text("training", timedelta(minutes=90), Usage(5.0, t0, 1), P4D_PRICE)
        == "training | 1h 30m | 1 node | 5.00 node-h | $109.80 so far"
    )
    assert (
        status_text("training", timedelta(seconds=5), Usage(0.5, t0, 2), None)
        == "training | 5s | 2 nodes | 0.50 node-h | cost n/a (no public price)"
    )
    assert (
        summary_text(timedelta(hours=2), Usage(16.0), 55.04)
        == "2h 00m, 16.00 node-h, about $880.64 at the on-demand list price"
    )


def test_a_status_line_in_ci_is_printed_on_phase_change_and_every_five_minutes():
    clock = FakeClock()
    rt = runtime(clock)
    status = StatusLine(rt)
    for minute in range(11):
        status.show("training", f"training at {minute}")
        clock.sleep(60)
    status.show("exporting", "exporting")
    assert printed(rt) == ["training at 0", "training at 5", "training at 10", "exporting"]


def test_bad_config_exits_2_before_anything_is_issued(tmp_path, monkeypatch, capsys):
    project = _project_with(tmp_path, "bad-run", {"runId": "Bad_Id", "instanceType": "p4d.24xlarge", "nodeCount": 0})
    world = World()
    monkeypatch.setattr("infra.core.project.load_project", lambda: project)
    monkeypatch.setattr("infra.ops.lifecycle.run.load_project", lambda: project)
    monkeypatch.setattr("infra.ops.lifecycle.cli._stacks", lambda: RecordingStacks(world))
    monkeypatch.setattr("infra.ops.lifecycle.cli.run_cloud", lambda config: RecordingCloud(world))
    assert main(["run", "--stack", "bad-run"]) == 2
    errors = capsys.readouterr().err.splitlines()
    assert errors[0].startswith("error: mlinfra:training.runId: ")
    assert errors[1].startswith("error: mlinfra:training.nodeCount: ")
    assert world.calls == []


def test_a_stack_that_is_not_training_is_refused_naming_the_flag(capsys):
    assert main(["teardown", "--stack", "serving-demo", "--yes"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --stack: 'serving-demo' is a serving stack; this command takes a training stack: "
        "training-demo, training-gcp-demo"
    )


def test_offline_preview_errors_stop_the_run_before_anything_is_issued():
    world = World()
    failing = SimpleNamespace(errors=[SimpleNamespace(message="StackReference 'registry': no stack")])
    code, rt, _ = launch(world, preview_fn=lambda stack, overrides, project: failing)
    assert code == 1 and world.calls == []
    assert printed(rt)[0] == "error: StackReference 'registry': no stack"


def test_expires_at_is_fixed_once_and_kept_on_a_rerun():
    world = World()
    clock = FakeClock()
    config = run_subject(load(stack_config(load_project(), STACK)))
    stacks = RecordingStacks(world)
    assert fix_expiry(STACK, stacks, config, runtime(clock)) == "2026-03-02T10:00:00Z"
    clock.sleep(3 * 3600)
    rt = runtime(clock)
    assert fix_expiry(STACK, stacks, config, rt) == "2026-03-02T10:00:00Z"
    assert [call for call in world.calls if call[0] == "set_config"] == [
        ("set_config", STACK, EXPIRES_AT, "2026-03-02T10:00:00Z")
    ]
    assert printed(rt) == ["expires-at: 2026-03-02T10:00:00Z (fixed when the run started; kept)"]


def test_an_existing_expiry_in_the_stack_config_is_kept():
    world = World()
    world.stacks[STACK] = StackState(training_config(expiresAt="2026-03-05T00:00:00Z"))
    code, rt, _ = launch(succeeding_world(polls_before_marker=0, stacks=world.stacks))
    assert "set_config" not in [c[0] for c in world.calls]


def test_an_expiry_that_has_passed_is_refused():
    world = run_world()
    world.stacks[STACK] = StackState(training_config(expiresAt="2026-03-01T09:00:00Z"))
    with pytest.raises(InputError) as error:
        launch(world)
    assert error.value.problems[0].path == EXPIRES_AT
    assert "has passed" in error.value.problems[0].message
    assert "up" not in world.names()


def test_ctrl_c_while_waiting_leaves_the_stack_and_says_how_to_resume():
    world = succeeding_world()
    world.interrupt_after = 10
    code, rt, _ = launch(world)
    assert code == 130
    assert "stop_compute" not in world.names() and "destroy" not in world.names()
    assert printed(rt)[-1] == (
        f"interrupted: stack {STACK} may still be deployed; its run guard stops the compute at expires-at "
        f"2026-03-02T10:00:00Z at the latest. Resume the teardown with: python -m infra teardown --stack {STACK}"
    )


def test_waiting_stops_at_expires_at_and_the_teardown_follows():
    world = run_world(export_states=["succeeded"], deploy_outputs=deployed_outputs(expires_at="2026-03-01T10:02:30Z"))
    world.instances[RUN_ID] = 4
    code, rt, clock = launch(world)
    lines = printed(rt)
    assert code == 1
    # one before the deploy; polls at 0, 30, ..., 120 s; one more in the teardown
    assert world.names().count("marker") == 1 + 5 + 1
    assert "job: expires-at reached; the run guard terminates the nodes and exports the checkpoints" in lines
    assert world.names()[-3:] == ["destroy", "audit", "remove"]
    assert lines[-1].startswith(f"run {RUN_ID}: stopped at expires-at; 2m ")


def test_nodes_gone_without_a_marker_end_the_wait():
    world = run_world(nodes_plan=[4, 4], export_states=["succeeded"])
    code, rt, _ = launch(world)
    assert code == 1
    assert "job: every node gone for 10m 00s with no completion marker" in printed(rt)
    assert world.names()[-1] == "remove"


def test_keep_leaves_the_stack_up():
    world = succeeding_world(polls_before_marker=2)
    code, rt, _ = launch(world, keep=True)
    assert code == 0
    assert "stop_compute" not in world.names() and STACK in world.stacks
    assert (
        f"stack {STACK} is kept (--keep) until expires-at 2026-03-02T10:00:00Z; tear it down with "
        f"`python -m infra teardown --stack {STACK}`" in printed(rt)
    )


def test_a_failed_up_is_torn_down_unless_kept():
    world = run_world(
        up_failure="error: InsufficientInstanceCapacity: no p4d.24xlarge in us-east-1a", export_states=["succeeded"]
    )
    code, rt, _ = launch(world)
    assert code == 1
    assert world.names()[5:8] == ["up", "exists", "config"]
    assert "remove" in world.names()
    kept = run_world(up_failure="error: InsufficientInstanceCapacity")
    assert launch(kept, keep=True)[0] == 1
    assert "destroy" not in kept.names()


def test_run_is_wired_to_the_cli_parser():
    from infra.cli import build_parser

    args = build_parser().parse_args(["run", "--stack", STACK, "--keep"])
    assert (args.verb, args.stack, args.keep) == ("run", STACK, True)
    args = build_parser().parse_args(["reap"])
    assert args.execute is False
    args = build_parser().parse_args(["audit", "--run-id", RUN_ID, "--region", "us-west-2", "--json"])
    assert (args.run_id, args.region, args.json) == (RUN_ID, "us-west-2", True)


def test_the_runtime_writes_whole_lines():
    rt = Runtime(now=FakeClock().now, sleep=lambda s: None, stream=__import__("io").StringIO())
    rt.say("one")
    assert rt.stream.getvalue() == "one\n"


def throttled():
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "DescribeInstances")


def expired_token():
    from botocore.exceptions import ClientError

    return ClientError(
        {"Error": {"Code": "ExpiredToken", "Message": "The security token included in the request is expired"}},
        "GetObject",
    )


def test_a_run_id_whose_marker_is_in_the_registry_is_refused_before_anything_is_created():
    world = run_world()
    world.markers[RUN_ID] = Marker("SUCCESS", exit_code=0)  # a run under this id ended (and was torn down)
    with pytest.raises(InputError) as error:
        launch(world)
    (problem,) = error.value.problems
    assert problem.path == "mlinfra:training.runId"
    assert str(problem) == (
        f"mlinfra:training.runId: run '{RUN_ID}' has already ended (runs/{RUN_ID}/_SUCCESS is in "
        "the registry); set a new runId for a new run and remove expiresAt (nothing was deployed)"
    )
    assert world.calls == [("exists", STACK), ("outputs", "registry"), ("marker", BUCKET, RUN_ID)]


def test_a_refused_run_id_exits_2_with_one_line(monkeypatch, capsys):
    world = run_world()
    world.markers[RUN_ID] = Marker("FAILED", exit_code=1)
    monkeypatch.setattr("infra.ops.lifecycle.cli._stacks", lambda: RecordingStacks(world))
    monkeypatch.setattr("infra.ops.lifecycle.cli.run_cloud", lambda config: RecordingCloud(world))
    monkeypatch.setattr("infra.ops.lifecycle.cli.terminal_runtime", lambda: runtime(FakeClock()))
    monkeypatch.setattr("infra.ops.lifecycle.cli.run_quotas", lambda config: None)  # quotas: test_run_quota.py
    assert main(["run", "--stack", STACK]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: mlinfra:training.runId: run '{RUN_ID}' has already ended (runs/{RUN_ID}/_FAILED")
    assert "up" not in world.names() and "set_config" not in world.names()


def test_a_deployed_stack_is_watched_not_refused_for_its_own_marker():
    """A re-run after Ctrl-C: the marker is this run's own, so the run goes on to its teardown."""
    world = run_world(export_states=["succeeded"])
    world.stacks[STACK] = StackState(
        training_config(expiresAt="2026-03-02T10:00:00Z"), deployed_outputs(), resources=True
    )
    world.markers[RUN_ID] = Marker("SUCCESS", exit_code=0, checkpoints_exported=True)
    code, rt, _ = launch(world)
    assert code == 0, printed(rt)
    assert world.names()[:5] == ["exists", "outputs", "config", "up", "outputs"]
    assert STACK not in world.stacks


def test_a_registry_with_no_bucket_is_refused_naming_the_registry_stack():
    world = run_world()
    world.stacks["registry"].outputs = {}
    with pytest.raises(InputError) as error:
        launch(world)
    assert str(error.value.problems[0]) == (
        "mlinfra:registryStack: stack 'registry' has no bucketName output: "
        "deploy the registry first (nothing was deployed)"
    )
    assert "up" not in world.names()


def test_a_new_stack_whose_file_has_a_passed_expiry_is_told_to_set_a_new_run_id(tmp_path):
    project = _project_with(
        tmp_path,
        "old-run",
        {
            "runId": "old-run-001",
            "instanceType": "p4d.24xlarge",
            "nodeCount": 2,
            "lifecycle": {"expiresAt": "2026-02-27T10:00:00Z"},
        },
    )
    world = run_world()
    rt = runtime(FakeClock())
    with pytest.raises(InputError) as error:
        run("old-run", RecordingStacks(world), RecordingCloud(world), rt, project=project, preview_fn=clean_preview)
    assert str(error.value.problems[0]) == (
        f"{EXPIRES_AT}: 2026-02-27T10:00:00Z has passed, so this run is over: tear it down with "
        "`python -m infra teardown --stack old-run`; for a new run set a new runId and remove expiresAt"
    )
    assert "set_config" not in world.names() and "up" not in world.names()


def test_aws_failing_for_a_while_in_the_wait_is_retried_with_one_line_each():
    from botocore.exceptions import EndpointConnectionError

    world = succeeding_world(
        polls_before_marker=3, node_errors=[throttled(), EndpointConnectionError(endpoint_url="https://ec2.us-east-1")]
    )
    code, rt, clock = launch(world)
    lines = printed(rt)
    assert code == 0, lines
    assert [line for line in lines if line.startswith("wait:")] == [
        "wait: AWS: ThrottlingException: Rate exceeded; trying again in 30s",
        'wait: AWS: EndpointConnectionError: Could not connect to the endpoint URL: "https://ec2.us-east-1"; '
        "trying again in 1m 00s",
    ]
    assert clock.sleeps[:2] == [30, 60]
    assert world.names()[-1] == "remove"


def test_aws_failing_past_the_retry_window_stops_waiting_and_leaves_the_run_to_its_guard():
    world = succeeding_world(node_errors=[expired_token()] * 50)
    code, rt, clock = launch(world)
    lines = printed(rt)
    assert code == 1
    assert clock.sleeps == [30, 60, 120, 240, 300, 300]  # gives up at the first failure 15 minutes in
    assert "stop_compute" not in world.names() and "destroy" not in world.names() and STACK in world.stacks
    assert len([line for line in lines if line.startswith("wait: AWS: ExpiredToken")]) == 6
    assert lines[-1] == (
        "wait: stopped waiting, AWS still failing after 15m 00s (AWS: ExpiredToken: The security token included in "
        f"the request is expired). Stack {STACK} stays deployed; its run guard stops the compute at expires-at "
        f"2026-03-02T10:00:00Z at the latest. Once the run has ended, or to end it now, finish with: "
        f"python -m infra teardown --stack {STACK}"
    )


def test_a_failure_in_the_wait_that_is_not_aws_is_not_hidden():
    world = succeeding_world(node_errors=[RuntimeError("a bug")])
    with pytest.raises(RuntimeError):
        launch(world)


def test_aws_failing_in_the_teardown_after_the_wait_says_how_to_resume():
    class ExpiringCloud(RecordingCloud):
        def stop_compute(self, run_id):
            raise expired_token()

    world = succeeding_world(polls_before_marker=2)
    rt = runtime(FakeClock())
    code = run(STACK, RecordingStacks(world), ExpiringCloud(world), rt, preview_fn=clean_preview)
    assert code == 1
    assert printed(rt)[-1] == (
        "error: AWS: ExpiredToken: The security token included in the request is expired; stack training-demo may "
        "still be deployed; its run guard stops the compute at expires-at 2026-03-02T10:00:00Z at the latest. "
        f"Resume the teardown with: python -m infra teardown --stack {STACK}"
    )


def test_a_run_id_another_stack_claimed_is_refused_before_anything_is_deployed():
    """Two stacks under one run id share the run's tag: one's marker would end both fleets and one's teardown
    would stop the other's nodes. The first stack to run claims the id in the registry."""
    world = succeeding_world()
    world.claims[RUN_ID] = {"stack": "mlinfra/training-other", "claimed_at": "2026-02-27T08:00:00Z"}
    with pytest.raises(InputError) as refused:
        launch(world)
    assert str(refused.value) == (
        f"mlinfra:training.runId: run id '{RUN_ID}' belongs to stack 'mlinfra/training-other' "
        f"(runs/{RUN_ID}/_CLAIM, claimed 2026-02-27T08:00:00Z); run ids are unique per registry: set a new runId "
        "(nothing was deployed)"
    )
    assert "up" not in world.names() and "set_config" not in world.names()


def test_a_rerun_of_the_stack_that_claimed_the_id_goes_ahead():
    world = succeeding_world()
    world.claims[RUN_ID] = {"stack": f"mlinfra/{STACK}", "claimed_at": "2026-03-01T09:00:00Z"}
    code, rt, _ = launch(world)
    assert code == 0
    assert f"run id {RUN_ID}: claimed by this stack on 2026-03-01T09:00:00Z" in printed(rt)
