"""Recording stand-ins for the lifecycle's two ports (`StackOps`, `RunCloud`) and a fake clock.

Both stand-ins act on one shared `World` (the Pulumi backend and the run's cloud side) and record
every call, in order, in `World.calls`. Failures are scripted (`destroy_failures`, `up_failure`,
`export_states`, `leftovers`, `leftovers_for`, `node_errors`), and so is an interruption: with
`interrupt_after=N` the N-th call takes effect and then raises KeyboardInterrupt, as a Ctrl-C right after that
step would.
"""

from __future__ import annotations

import copy
import io
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from infra.core.paths import set_path
from infra.ops.lifecycle.ports import (
    ComputeStillRunning,
    ExportStatus,
    Leftover,
    Marker,
    OnOutput,
    StackOpsError,
    StoppedCompute,
)
from infra.ops.runtime import Runtime

RUN_ID = "demo-llama-7b-001"
BUCKET = "mlinfra-registry-0123"
START = datetime(2026, 3, 1, 10, 0, 30, tzinfo=UTC)
STOPPED_AT = "2026-03-01T10:00:24Z"  # when, by AWS's clock, the run's last instance stopped
DEPENDENCY_VIOLATION = (
    "error: deleting urn:pulumi:s::mlinfra::aws:ec2/securityGroup:SecurityGroup::run-efa: "
    "operation error EC2: DeleteSecurityGroup, api error DependencyViolation: resource "
    "sg-0abc has a dependent object"
)
PLACEMENT_GROUP_IN_USE = (
    "error: deleting EC2 Placement Group (run-pg): operation error EC2: DeletePlacementGroup, "
    "api error InvalidPlacementGroup.InUse: The placement group 'run-pg' is in use"
)


class FakeClock:
    """Time that moves only when someone sleeps (or the test says so)."""

    def __init__(self, start: datetime = START):
        self.at = start
        self.sleeps: list[float] = []

    def now(self) -> datetime:
        return self.at

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.at += timedelta(seconds=seconds)


def runtime(clock: FakeClock, live: bool = False) -> Runtime:
    return Runtime(now=clock.now, sleep=clock.sleep, stream=io.StringIO(), live=live)


def printed(rt: Runtime) -> list[str]:
    return rt.stream.getvalue().splitlines()


def training_config(run_id: str = RUN_ID, **lifecycle: Any) -> dict[str, Any]:
    return {
        "aws:region": "us-east-1",
        "mlinfra:kind": "training",
        "mlinfra:registryStack": "registry",
        "mlinfra:training": {
            "runId": run_id,
            "instanceType": "p4d.24xlarge",
            "nodeCount": 4,
            "lifecycle": {"ttlHours": 24, **lifecycle},
        },
    }


def deployed_outputs(run_id: str = RUN_ID, expires_at: str = "2026-03-02T10:00:00Z") -> dict[str, Any]:
    return {
        "runId": run_id,
        "expiresAt": expires_at,
        "instanceType": "p4d.24xlarge",
        "nodeCount": 4,
        "registryBucket": BUCKET,
        "lustreDnsName": "fs-0123.fsx.us-east-1.amazonaws.com",
    }


def deployment_marker(status: str, expires_at: str = "2026-03-02T10:00:00Z", **fields: Any) -> Marker:
    """A marker as the nodes of the deployment with `expires_at` (deployed_outputs' by default) write it."""
    epoch = int(datetime.strptime(expires_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp())
    return Marker(status, expires_at=epoch, body={"expires_at": epoch}, **fields)  # type: ignore[arg-type]


@dataclass
class StackState:
    config: dict[str, Any]
    outputs: dict[str, Any] = field(default_factory=dict)
    resources: bool = False


@dataclass
class World:
    stacks: dict[str, StackState] = field(default_factory=dict)
    instances: dict[str, int] = field(default_factory=dict)  # run id -> pending/running instances
    filesystems: set[str] = field(default_factory=set)  # run ids with a file system
    markers: dict[str, Marker] = field(default_factory=dict)
    claims: dict[str, dict[str, str]] = field(default_factory=dict)  # run id -> runs/<run-id>/_CLAIM
    markers_after: int = 0  # marker() answers None this many times first
    nodes_plan: list[int] = field(default_factory=list)  # active_nodes answers, then the live count
    export_states: list[str] = field(default_factory=lambda: ["started", "running", "succeeded"])
    export_detail: str = ""
    stopped_at: str | None = STOPPED_AT  # what stop_compute says (None: AWS did not say)
    compute_stays: bool = False  # stop_compute's wait ends with instances still there
    leftovers: list[Leftover] = field(default_factory=list)
    leftovers_for: int | None = None  # the leftovers are listed by this many audits, then gone (None: always)
    node_errors: list[BaseException] = field(default_factory=list)  # raised by the next active_nodes calls
    destroy_failures: list[str] = field(default_factory=list)  # outputs of the next failing destroys
    busy_plan: list[str] = field(default_factory=list)  # file_system_busy answers, then None
    up_failure: str | None = None
    state_holds_file_system: bool | None = None  # StackOps.holds answer (None: whether the stack has resources)
    deploy_outputs: dict[str, Any] = field(default_factory=deployed_outputs)
    interrupt_after: int | None = None
    calls: list[tuple] = field(default_factory=list)

    def record(self, *call: Any) -> None:
        self.calls.append(call)

    def step_done(self) -> None:
        if self.interrupt_after is not None and len(self.calls) == self.interrupt_after:
            raise KeyboardInterrupt

    def names(self) -> list[str]:
        return [call[0] for call in self.calls]


def registry_state(bucket: str = BUCKET) -> StackState:
    """The deployed `registry` stack the training stack refers to (`mlinfra:registryStack`)."""
    return StackState({"mlinfra:kind": "registry"}, {"bucketName": bucket}, resources=True)


def run_world(**overrides: Any) -> World:
    """Nothing deployed yet but the registry: what `run` starts from."""
    world = World(**overrides)
    world.stacks.setdefault("registry", registry_state())
    return world


def deployed_world(**overrides: Any) -> World:
    """A training stack `training-demo` that is up: four nodes running, a file system holding checkpoints."""
    world = World(**overrides)
    world.stacks["training-demo"] = StackState(training_config(), deployed_outputs(), resources=True)
    world.instances[RUN_ID] = 4
    world.filesystems.add(RUN_ID)
    return world


class RecordingStacks:
    """`StackOps` over the World's backend."""

    def __init__(self, world: World):
        self.world = world

    def list_stacks(self) -> list[str]:
        self.world.record("list_stacks")
        self.world.step_done()
        return sorted(self.world.stacks)

    def exists(self, stack: str) -> bool:
        self.world.record("exists", stack)
        self.world.step_done()
        return stack in self.world.stacks

    def config(self, stack: str) -> dict[str, Any]:
        self.world.record("config", stack)
        state = self._state(stack, "config")
        self.world.step_done()
        return copy.deepcopy(state.config)

    def set_config(self, stack: str, path: str, value: str) -> None:
        self.world.record("set_config", stack, path, value)
        state = self.world.stacks.setdefault(stack, StackState(training_config()))
        set_path(state.config, path, value)
        self.world.step_done()

    def up(self, stack: str, on_output: OnOutput) -> None:
        self.world.record("up", stack)
        state = self.world.stacks.setdefault(stack, StackState(training_config()))
        on_output(f"Updating ({stack}):")
        if self.world.up_failure:
            raise StackOpsError("up", stack, self.world.up_failure)
        run_id = self.world.deploy_outputs["runId"]
        state.outputs, state.resources = dict(self.world.deploy_outputs), True
        self.world.filesystems.add(run_id)
        self.world.instances.setdefault(run_id, 0)
        on_output("Resources: 45 created")
        self.world.step_done()

    def destroy(self, stack: str, on_output: OnOutput) -> None:
        self.world.record("destroy", stack)
        state = self._state(stack, "destroy")
        if self.world.destroy_failures:
            raise StackOpsError("destroy", stack, self.world.destroy_failures.pop(0))
        run_id = state.outputs.get("runId") or state.config["mlinfra:training"]["runId"]
        state.outputs, state.resources = {}, False
        self.world.filesystems.discard(run_id)
        self.world.instances[run_id] = 0
        self.world.step_done()

    def outputs(self, stack: str) -> dict[str, Any]:
        self.world.record("outputs", stack)
        state = self._state(stack, "stack output")
        self.world.step_done()
        return dict(state.outputs)

    def remove(self, stack: str) -> None:
        self.world.record("remove", stack)
        state = self._state(stack, "stack rm")
        if state.resources:
            raise StackOpsError("stack rm", stack, "error: 'training-demo' still has resources; use --force")
        del self.world.stacks[stack]
        self.world.step_done()

    def holds(self, stack: str, resource_ids) -> bool:
        self.world.record("holds", stack, tuple(resource_ids))
        held = self.world.state_holds_file_system
        return self._state(stack, "stack export").resources if held is None else held

    def _state(self, stack: str, operation: str) -> StackState:
        if stack not in self.world.stacks:
            raise StackOpsError(operation, stack, f"error: no stack named '{stack}' found")
        return self.world.stacks[stack]


class RecordingCloud:
    """`RunCloud` over the World's cloud side."""

    def __init__(self, world: World):
        self.world = world

    def marker(self, bucket: str, run_id: str) -> Marker | None:
        self.world.record("marker", bucket, run_id)
        self.world.step_done()
        if self.world.markers_after > 0:
            self.world.markers_after -= 1
            return None
        return self.world.markers.get(run_id)

    def claim(self, bucket: str, run_id: str, claim: dict[str, str]) -> dict[str, str]:
        self.world.record("claim", bucket, run_id)
        self.world.step_done()
        return self.world.claims.setdefault(run_id, claim)

    def active_nodes(self, run_id: str) -> int:
        self.world.record("active_nodes", run_id)
        self.world.step_done()
        if self.world.node_errors:
            raise self.world.node_errors.pop(0)
        if self.world.nodes_plan:
            return self.world.nodes_plan.pop(0)
        return self.world.instances.get(run_id, 0)

    def stop_compute(self, run_id: str) -> StoppedCompute:
        self.world.record("stop_compute", run_id)
        if self.world.compute_stays:
            raise ComputeStillRunning(f"instances of run {run_id} still not terminated 600 s after their termination "
                                      "was asked; nothing else was changed")  # fmt: skip
        count, self.world.instances[run_id] = self.world.instances.get(run_id, 0), 0
        self.world.step_done()
        return StoppedCompute(tuple(f"i-{n:017x}" for n in range(count)), self.world.stopped_at)

    def expect_file_systems(self, file_system_ids, bucket=None) -> None:
        self.expected_file_systems = tuple(file_system_ids)  # not a call on AWS: kept, not recorded

    def export_checkpoints(self, run_id: str, since: str | None = None) -> ExportStatus:
        if run_id not in self.world.filesystems:
            state = "no-filesystem"
        else:
            states = self.world.export_states
            state = states.pop(0) if len(states) > 1 else states[0]
            if state == "no-filesystem":  # scripted: the guard's deletion ("deleting") has finished
                self.world.filesystems.discard(run_id)
        self.world.record("export_checkpoints", run_id, since, state)
        self.world.step_done()
        return ExportStatus(
            state,
            self.world.export_detail if state in ("failed", "nothing-linked") else "",
            None if state == "no-filesystem" else "task-0123",
        )

    def file_system_busy(self, run_id: str) -> str | None:
        self.world.record("file_system_busy", run_id)
        self.world.step_done()
        return self.world.busy_plan.pop(0) if self.world.busy_plan else None

    def audit(self, run_id: str) -> list[Leftover]:
        self.world.record("audit", run_id)
        self.world.step_done()
        if self.world.leftovers_for is not None:
            if self.world.leftovers_for <= 0:
                return []
            self.world.leftovers_for -= 1
        return list(self.world.leftovers)
