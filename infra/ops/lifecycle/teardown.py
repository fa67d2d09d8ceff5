"""Teardown of one training stack: stop compute, confirm the checkpoints are exported, destroy, audit,
remove the stack.

Stateless: every step derives what to do from the stack and the cloud as they are now, so a teardown
interrupted at any point and run again finishes. The stack is removed only when the audit finds
nothing left with the run's tag (looking again for a few minutes while the cloud finishes deleting); on any
problem it is kept, so the next run can pick up from there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from infra.core.errors import InputError, Problem
from infra.ops.lifecycle.ports import ComputeStillRunning, RunCloud, StackOps, StackOpsError, StoppedCompute
from infra.ops.lifecycle.target import deployed_region, marker_bucket
from infra.ops.runtime import Runtime, iso, span
from infra.training.limits import EXPORT_POLL_SECONDS, EXPORT_WAIT_SECONDS

# Destroy failures that go away on their own once the cloud has finished releasing what held the resource.
TRANSIENT_DESTROY_FAILURES = (
    ("DependencyViolation", "a security group is still held by network interfaces being released"),
    ("InvalidPlacementGroup.InUse", "the placement group still holds terminating instances"),
    # GCP: a subnet, network or placement policy still used by instances or a file system being deleted
    ("resourceInUseByAnotherResource", "a network resource is still used by resources being deleted"),
    # GCP: the private services access peering while Managed Lustre is still being deleted
    ("Producer services", "private services access is still used by the file system being deleted"),
)


@dataclass(frozen=True)
class Backoff:
    """Destroy retries: 30 s, 1, 2, 4 min, then every 5 min; about 22 minutes in all by default."""

    attempts: int = 8
    first_seconds: float = 30
    factor: float = 2
    max_seconds: float = 300

    def delay(self, failures: int) -> float:
        return min(self.max_seconds, self.first_seconds * self.factor ** (failures - 1))


@dataclass(frozen=True)
class AuditRetry:
    """Right after a destroy the audit may still list what the cloud is deleting (network interfaces of a file
    system, a log group): look again after these pauses before calling anything a leftover. 4 looks
    over 5 minutes by default."""

    pauses: Sequence[float] = (60, 90, 150)


@dataclass(frozen=True)
class RunFacts:
    """What teardown needs to know about the stack's run."""

    run_id: str
    bucket: str | None  # where the markers are (the registry, or GCP's data bucket), from the outputs
    export_checkpoints: bool
    file_system_ids: tuple[str, ...] = ()  # the stack's own record of its file system (outputs)
    expires_at: str | None = None  # the deployment's expires-at (outputs): which markers are its own


def transient_destroy_failure(output: str) -> str | None:
    """Why a failed destroy is worth retrying, or None when it is not a known transient failure."""
    for code, reason in TRANSIENT_DESTROY_FAILURES:
        if code in output:
            return f"{code}: {reason}"
    return None


def training_config(config: dict[str, Any]) -> dict[str, Any]:
    """The `mlinfra:training` map of a stack's config ({} when absent)."""
    training = config.get("mlinfra:training")
    return training if isinstance(training, dict) else {}


def lifecycle_config(config: dict[str, Any]) -> dict[str, Any]:
    """The `mlinfra:training.lifecycle` map of a stack's config ({} when absent)."""
    lifecycle = training_config(config).get("lifecycle")
    return lifecycle if isinstance(lifecycle, dict) else {}


def run_facts(stack: str, config: dict[str, Any], outputs: dict[str, Any]) -> RunFacts:
    run_id = outputs.get("runId") or training_config(config).get("runId")
    if not isinstance(run_id, str) or not run_id:
        raise InputError(Problem("mlinfra:training.runId", f"stack {stack!r} has no run id in its outputs or config"))
    lifecycle = lifecycle_config(config)
    file_system = outputs.get("lustreFileSystemId") or outputs.get("lustreInstanceId")
    return RunFacts(
        run_id=run_id,
        bucket=marker_bucket(outputs),
        export_checkpoints=lifecycle.get("exportCheckpoints", True) is not False,
        file_system_ids=(file_system,) if isinstance(file_system, str) and file_system else (),
        expires_at=outputs.get("expiresAt") if isinstance(outputs.get("expiresAt"), str) else None,
    )


def export_since(stopped: StoppedCompute, rt: Runtime) -> str:
    """From when an export sees every write: when the last instance stopped by the cloud's clock, else local
    now (stop_compute has returned, so nothing runs). Never earlier: a clock behind the cloud's could then
    accept an export that began while a node still wrote; one ahead only costs a redundant export
    (the adapter always accepts the tasks it started itself)."""
    return stopped.stopped_at or iso(rt.now())


def teardown(
    stack: str,
    stacks: StackOps,
    cloud: RunCloud,
    rt: Runtime,
    *,
    run_id: str | None = None,
    backoff: Backoff = Backoff(),
    audit_retry: AuditRetry = AuditRetry(),
    on_phase: Callable[[str], None] = lambda phase: None,
    engine_output: Callable[[str], None] | None = None,
) -> int:
    """Tear `stack` down; 0 when nothing is left, 1 when a step found a problem (the stack is kept).
    `run_id` (from the stack file) is audited when the stack no longer exists. The engine's output of
    the destroy is printed indented unless `engine_output` takes it."""
    engine_output = engine_output or (lambda line: rt.say(f"  {line}") if line.strip() else None)
    if not stacks.exists(stack):
        if run_id is None:
            rt.say(f"stack {stack}: does not exist, and no run id to audit; nothing to do")
            return 0
        rt.say(f"stack {stack}: already removed; auditing run {run_id}")
        return 0 if _audit_clean(stack, cloud, run_id, rt, audit_retry) else 1
    config, outputs = stacks.config(stack), stacks.outputs(stack)
    facts = run_facts(stack, config, outputs)
    rt.say(f"stack {stack}: run {facts.run_id}, bucket {facts.bucket or 'unknown (no outputs)'}")
    deployed, in_file = deployed_region(outputs), config.get("aws:region")
    if deployed and isinstance(in_file, str) and in_file != deployed:
        rt.say(f"stack {stack}: deployed in {deployed}, its file now says aws:region {in_file}; acting in {deployed}")
    cloud.expect_file_systems(facts.file_system_ids, facts.bucket)
    on_phase("tearing down")
    try:
        stopped = cloud.stop_compute(facts.run_id)
    except ComputeStillRunning as error:
        rt.say(f"compute: {error}; run `python -m infra teardown --stack {stack}` again")
        return 1
    since = export_since(stopped, rt)  # every instance is gone: an export created from then on sees every write
    rt.say(
        f"compute: terminated {len(stopped.instance_ids)} instance(s) of run {facts.run_id}"
        if stopped.instance_ids
        else f"compute: no instance of run {facts.run_id} running"
    )
    on_phase("exporting")
    if not _checkpoints_safe(stack, facts, stacks, cloud, since, rt):
        return 1
    on_phase("tearing down")
    if not _file_system_settled(stack, facts.run_id, cloud, rt):
        return 1
    if not _destroy(stack, stacks, rt, backoff, engine_output):
        return 1
    if not _audit_clean(stack, cloud, facts.run_id, rt, audit_retry):
        return 1
    stacks.remove(stack)
    rt.say(f"stack {stack}: removed (its file in stacks/ is kept)")
    return 0


def _checkpoints_safe(stack: str, facts: RunFacts, stacks: StackOps, cloud: RunCloud, since: str, rt: Runtime) -> bool:
    """True once the run's checkpoints are in the registry, or there is nothing left to export."""
    if not facts.export_checkpoints:
        rt.say("checkpoints: not exported (exportCheckpoints is false)")
        return True
    marker = cloud.marker(facts.bucket, facts.run_id) if facts.bucket else None
    if marker is not None and marker.status == "SUCCESS" and marker.checkpoints_exported:
        if marker.written_by(facts.expires_at):
            rt.say(f"checkpoints: exported by the nodes (runs/{facts.run_id}/_SUCCESS)")
            return True
        rt.say(
            f"checkpoints: runs/{facts.run_id}/_SUCCESS is not this deployment's (it was written for expires-at "
            f"{marker.body.get('expires_at', 'unknown')}, this one's is {facts.expires_at or 'unknown'}); "
            "exporting anyway"
        )
    started = rt.now()
    while True:
        status = cloud.export_checkpoints(facts.run_id, since=since)
        task = f" (task {status.task_id})" if status.task_id else ""
        if status.state == "succeeded":
            rt.say(f"checkpoints: exported to the registry{task}")
            return True
        if status.state == "no-filesystem":
            rt.say("checkpoints: no file system left to export from")
            return True
        if status.state == "nothing-linked":
            rt.say(f"checkpoints: none to export ({status.detail}); the destroy deletes it")
            return True
        if status.state == "missing":
            if not stacks.holds(stack, facts.file_system_ids):  # an earlier teardown's destroy deleted it
                rt.say(f"checkpoints: file system {', '.join(facts.file_system_ids)} already destroyed with the stack")
                return True
            rt.say(
                f"checkpoints: {status.detail}; nothing was destroyed: check the region and account the stack "
                f"was deployed to, then run `python -m infra teardown --stack {stack}` again"
            )
            return False
        if status.state == "failed":
            rt.say(
                f"checkpoints: export failed{task}: {status.detail or 'no detail'}; nothing was destroyed, "
                f"fix it and run `python -m infra teardown --stack {stack}` again"
            )
            return False
        waited = rt.now() - started
        # "deleting": the file system is being deleted (on AWS by the guard, after its export); destroying now
        # would fail on the network resources it still holds, so wait until it is gone.
        doing = (
            "exported; the file system is being deleted"
            if status.state == "deleting"
            else f"export {status.state}{task}"
        )
        if _waited_out(stack, f"checkpoints: {doing}", waited, rt):
            return False
        rt.say(f"checkpoints: {doing}, {span(waited)} so far")
        rt.sleep(EXPORT_POLL_SECONDS)


def _file_system_settled(stack: str, run_id: str, cloud: RunCloud, rt: Runtime) -> bool:
    """Wait while the file system cannot be destroyed: a repository task the run guard started is pending or
    running (FSx refuses DeleteFileSystem with BadRequest, which the destroy does not retry), or the guard is
    deleting it. True once a destroy may go ahead; False (nothing destroyed) when it still cannot after the
    export wait."""
    started = rt.now()
    while True:
        busy = cloud.file_system_busy(run_id)
        if busy is None:
            return True
        waited = rt.now() - started
        if _waited_out(stack, f"file system: {busy}", waited, rt):
            return False
        rt.say(f"file system: {busy}; waiting before the destroy, {span(waited)} so far")
        rt.sleep(EXPORT_POLL_SECONDS)


def _waited_out(stack: str, state: str, waited: timedelta, rt: Runtime) -> bool:
    """Whether the export wait is over (said, with how to go on waiting): nothing is destroyed then."""
    if waited < timedelta(seconds=EXPORT_WAIT_SECONDS):
        return False
    rt.say(
        f"{state}, still after {span(waited)}; nothing was destroyed, "
        f"run `python -m infra teardown --stack {stack}` again to keep waiting"
    )
    return True


def _destroy(stack: str, stacks: StackOps, rt: Runtime, backoff: Backoff, engine_output: Callable[[str], None]) -> bool:
    for attempt in range(1, backoff.attempts + 1):
        try:
            stacks.destroy(stack, engine_output)
        except StackOpsError as error:
            reason = transient_destroy_failure(error.output)
            if reason is None:
                rt.say(f"destroy: failed: {_error_lines(error.output)}; the stack is kept")
                return False
            if attempt == backoff.attempts:
                rt.say(
                    f"destroy: still failing after {attempt} attempts ({reason}); the stack is kept, "
                    f"run `python -m infra teardown --stack {stack}` again later"
                )
                return False
            delay = backoff.delay(attempt)
            rt.say(
                f"destroy: {reason}; retrying in {span(timedelta(seconds=delay))} "
                f"(attempt {attempt + 1} of {backoff.attempts})"
            )
            rt.sleep(delay)
            continue
        rt.say(f"destroy: stack {stack} holds no resources")
        return True
    return False


def _audit_clean(stack: str, cloud: RunCloud, run_id: str, rt: Runtime, retry: AuditRetry) -> bool:
    """True when the audit finds nothing; what it finds is called left over only once it is still there
    after the retry's pauses (clouds list resources for a while after deleting them)."""
    looks = len(retry.pauses) + 1
    for look, pause in enumerate([*retry.pauses, None], start=1):
        leftovers = cloud.audit(run_id)
        if not leftovers:
            rt.say(f"audit: nothing left with run id {run_id}")
            return True
        if pause is None:
            break
        rt.say(
            f"audit: {len(leftovers)} resource(s) of run {run_id} still listed, the cloud may still be deleting "
            f"them; looking again in {span(timedelta(seconds=pause))} (look {look + 1} of {looks})"
        )
        rt.sleep(pause)
    rt.say(f"audit: {len(leftovers)} resource(s) still belong to run {run_id}; stack {stack} is kept:")
    for leftover in leftovers:
        rt.say(f"  {leftover.kind}  {leftover.identifier}  (found by {leftover.found_by})")
    return False


def _error_lines(output: str, limit: int = 3) -> str:
    """The engine's error lines, the part of a failed destroy's output worth showing."""
    lines = [line.strip() for line in output.splitlines() if "error" in line.lower() and line.strip()]
    return " | ".join(lines[-limit:]) if lines else (output.strip().splitlines() or ["no output"])[-1]
