"""The reap planner with a fixed clock, and the executor against the recording stand-ins."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from infra.ops.lifecycle.reap import ReapDecision, StackFacts, gather, plan_reap, reap
from tests.infra.ops.lifecycle.recording import (
    FakeClock,
    RecordingCloud,
    RecordingStacks,
    StackState,
    World,
    deployed_outputs,
    printed,
    runtime,
    training_config,
)

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def training(name: str, output: str | None = None, config: str | None = None, deployed: bool = True) -> StackFacts:
    return StackFacts(name, "training", deployed=deployed, expires_at_output=output, expires_at_config=config)


def test_expired_stacks_are_reaped_and_the_others_kept_with_their_time_left():
    decisions = plan_reap(
        [
            training("run-b", output="2026-03-01T11:59:59Z"),
            training("run-a", output="2026-03-01T08:45:00Z"),
            training("run-c", output="2026-03-02T14:30:00Z"),
            training("run-d", output="2026-03-01T12:00:00Z"),
        ],
        NOW,
    )
    assert decisions == [
        ReapDecision("run-a", "reap", "expired at 2026-03-01T08:45:00Z, 3h 15m ago"),
        ReapDecision("run-b", "reap", "expired at 2026-03-01T11:59:59Z, 1s ago"),
        ReapDecision("run-c", "keep", "expires at 2026-03-02T14:30:00Z, in 26h 30m"),
        ReapDecision("run-d", "reap", "expired at 2026-03-01T12:00:00Z, 0s ago"),
    ]


def test_the_deployed_expiry_wins_over_the_config_and_the_config_is_the_fallback():
    decisions = plan_reap(
        [
            training("deployed", output="2026-03-01T10:00:00Z", config="2026-03-09T00:00:00Z"),
            training("config-only", config="2026-03-01T11:00:00Z", deployed=False),
        ],
        NOW,
    )
    assert [(d.stack, d.action) for d in decisions] == [("config-only", "reap"), ("deployed", "reap")]


def test_other_kinds_are_not_reaped_nor_listed():
    decisions = plan_reap(
        [StackFacts("registry", "registry"), StackFacts("serving-demo", "serving"), StackFacts("elsewhere", None)], NOW
    )
    assert decisions == []


def test_a_training_stack_never_deployed_with_no_expiry_is_skipped():
    assert plan_reap([training("fresh", deployed=False)], NOW) == [
        ReapDecision("fresh", "skip", "never deployed, and no expiresAt")
    ]


def test_a_deployed_stack_with_no_expiry_needs_a_human():
    (decision,) = plan_reap([training("legacy")], NOW)
    assert decision.action == "problem"
    assert "deployed with no expiresAt" in decision.reason


def test_a_malformed_expiry_is_reported_not_guessed():
    decisions = plan_reap(
        [
            training("bad-output", output="2026-03-01 08:00", config="2026-03-01T08:00:00Z"),
            training("bad-config", config="tomorrow", deployed=False),
        ],
        NOW,
    )
    assert decisions == [
        ReapDecision(
            "bad-config", "problem", "expiresAt 'tomorrow' (config) is not a UTC time like 2026-11-22T08:00:00Z"
        ),
        ReapDecision(
            "bad-output", "problem", "expiresAt '2026-03-01 08:00' (output) is not a UTC time like 2026-11-22T08:00:00Z"
        ),
    ]


def test_an_unreadable_stack_is_reported():
    (decision,) = plan_reap([StackFacts("broken", None, unreadable="pulumi config of stack 'broken' failed")], NOW)
    assert decision.action == "problem" and "cannot read the stack" in decision.reason


def _world() -> World:
    world = World()
    world.stacks["run-old"] = StackState(
        training_config("run-old"), deployed_outputs("run-old", "2026-03-01T09:00:00Z"), resources=True
    )
    world.stacks["run-new"] = StackState(
        training_config("run-new"), deployed_outputs("run-new", "2026-03-02T09:00:00Z"), resources=True
    )
    world.stacks["registry"] = StackState({"mlinfra:kind": "registry"}, {"bucketName": "b"}, resources=True)
    world.instances.update({"run-old": 2, "run-new": 4})
    world.filesystems.update({"run-old", "run-new"})
    world.export_states = ["succeeded"]
    return world


def test_gather_reads_kind_config_and_outputs_through_the_stack_port():
    world = _world()
    facts = gather(RecordingStacks(world))
    assert world.calls == [
        ("list_stacks",),
        ("config", "registry"),
        ("config", "run-new"),
        ("outputs", "run-new"),
        ("config", "run-old"),
        ("outputs", "run-old"),
    ]
    assert facts[2] == StackFacts(
        "run-old", "training", deployed=True, expires_at_output="2026-03-01T09:00:00Z", expires_at_config=None
    )


def test_reap_is_a_dry_run_by_default():
    world = _world()
    rt = runtime(FakeClock(NOW))
    assert reap(RecordingStacks(world), lambda stack: RecordingCloud(world), rt, execute=False) == 0
    assert set(world.names()) == {"list_stacks", "config", "outputs"}
    assert printed(rt) == [
        "keep     run-new  expires at 2026-03-02T09:00:00Z, in 21h 00m",
        "reap     run-old  expired at 2026-03-01T09:00:00Z, 3h 00m ago",
        "dry run: 1 stack(s) would be torn down; `python -m infra reap --execute` does it",
    ]


def test_reap_execute_tears_down_only_the_expired_stacks():
    world = _world()
    asked = []

    def cloud_for(stack):
        asked.append(stack)
        return RecordingCloud(world)

    rt = runtime(FakeClock(NOW))
    assert reap(RecordingStacks(world), cloud_for, rt, execute=True) == 0
    assert sorted(world.stacks) == ["registry", "run-new"]
    assert world.instances == {"run-old": 0, "run-new": 4}
    assert asked == ["run-old"]
    assert ("destroy", "run-new") not in world.calls
    assert "reap: tearing down run-old" in printed(rt)


def test_reap_reports_a_failed_teardown_and_goes_on():
    world = _world()
    world.stacks["run-older"] = StackState(
        training_config("run-older"), deployed_outputs("run-older", "2026-03-01T08:00:00Z"), resources=True
    )
    world.destroy_failures = ["error: AccessDenied: not authorized"]
    rt = runtime(FakeClock(NOW))
    assert reap(RecordingStacks(world), lambda stack: RecordingCloud(world), rt, execute=True) == 1
    assert "run-old" in world.stacks and "run-older" not in world.stacks
    assert printed(rt)[-1] == "reap: needs attention: run-old"


def _aws_throttled():
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "TerminateInstances")


@pytest.mark.parametrize(
    "error, reported",
    [
        (
            RuntimeError("instances of run run-old still not terminated after 600 s"),
            "reap: run-old: RuntimeError: instances of run run-old still not terminated after 600 s",
        ),
        (_aws_throttled(), "reap: run-old: AWS: Throttling: Rate exceeded"),
    ],
)
def test_any_failure_of_one_stack_is_reported_and_the_others_are_still_reaped(error, reported):
    world = _world()
    world.stacks["run-older"] = StackState(
        training_config("run-older"), deployed_outputs("run-older", "2026-03-01T08:00:00Z"), resources=True
    )
    world.instances["run-older"] = 2
    world.filesystems.add("run-older")

    class Failing(RecordingCloud):
        def stop_compute(self, run_id):
            if run_id == "run-old":
                raise error
            return super().stop_compute(run_id)

    rt = runtime(FakeClock(NOW))
    assert reap(RecordingStacks(world), lambda stack: Failing(world), rt, execute=True) == 1
    assert "run-old" in world.stacks and "run-older" not in world.stacks
    lines = printed(rt)
    assert reported in lines
    assert lines.index(reported) < lines.index("reap: tearing down run-older")
    assert lines[-1] == "reap: needs attention: run-old"


def test_a_deployed_stack_it_cannot_classify_needs_a_human_not_silence():
    """A stack whose file lost its kind (or names one reap does not know) may be a training run that bills: it is
    reported, where it used to read as "no training stacks"."""
    decisions = plan_reap(
        [
            StackFacts("lost-file", None, deployed=True),
            StackFacts("odd-kind", "trainer", deployed=True),
            StackFacts("never-up", None, deployed=False),
            StackFacts("registry", "registry", deployed=True),
        ],
        NOW,
    )
    assert [(d.stack, d.action) for d in decisions] == [("lost-file", "problem"), ("odd-kind", "problem")]
    assert decisions[0].reason.startswith("deployed, but its config has no mlinfra:kind: reap cannot tell")
    world = World()
    world.stacks["lost-file"] = StackState({}, deployed_outputs(), resources=True)
    rt = runtime(FakeClock())
    assert reap(RecordingStacks(world), lambda stack: RecordingCloud(world), rt, execute=False) == 1
    assert printed(rt)[0].startswith("problem  lost-file  deployed, but its config has no mlinfra:kind")
