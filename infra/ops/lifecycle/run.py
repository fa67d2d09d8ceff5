"""`run --stack S`: check offline, fix expires-at, deploy, watch the run to its end, tear down.

Nothing is created until the offline preview of the stack is clean and, on AWS, a new run's needs fit the
Region's Service Quotas (infra.ops.lifecycle.quota), and a run id whose completion
marker is already in the registry is refused (its marker would end the new run at once). expires-at
is written to the stack's config once and never moved, so a re-run (after Ctrl-C, say) keeps the
run's hard cap. The wait ends at the completion marker, at expires-at (on AWS the run guard has taken
over by then), or when the nodes have been gone for a while with no marker; then the teardown runs
unless asked to keep. The cloud failing while it waits (throttling, expiring credentials, no network) is retried
for a while; after that it stops waiting and leaves the run to its hard cap (the run guard on AWS,
Compute Engine's termination time on GCP).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from infra.core.errors import InputError, Problem
from infra.core.project import Project, load_project
from infra.kinds import load
from infra.ops.lifecycle.ports import Marker, RunCloud, StackOps, StackOpsError
from infra.ops.lifecycle.quota import QuotaSource, check_quotas
from infra.ops.lifecycle.target import RunSubject, marker_bucket, run_subject, training_stack_config
from infra.ops.lifecycle.teardown import lifecycle_config, teardown
from infra.ops.progress import StatusLine, Usage, status_text, summary_text
from infra.ops.runtime import Runtime, cloud_error, iso, parse_iso, span
from infra.tools.offline.engine import preview
from infra.training.aws.config import TrainingStackConfig
from infra.training.lifetime import run_expiry
from infra.training.spec import EXPIRES_AT_KEY

EXPIRES_AT = EXPIRES_AT_KEY
RUN_ID = "mlinfra:training.runId"
WAIT_POLL_SECONDS = 30
NODES_GONE_AFTER = timedelta(minutes=10)  # nodes seen, then none and no marker: the job died without one
# The cloud failing while waiting: try again after 30 s, 1, 2, 4, then every 5 minutes; stop waiting once it
# has failed for this long in a row (the run guard does not depend on this machine).
CLOUD_RETRY_FIRST_SECONDS, CLOUD_RETRY_MAX_SECONDS = 30, 300
CLOUD_FAILING_GIVE_UP = timedelta(minutes=15)


@dataclass(frozen=True)
class WaitResult:
    ended: Literal["marker", "expired", "nodes-gone", "cloud-failing"]
    marker: Marker | None = None
    error: str = ""  # "cloud-failing": the last cloud error


class Progress:
    """Usage so far and the status line of this run."""

    def __init__(self, rt: Runtime, price: float | None):
        self.rt, self.price = rt, price
        self.started = rt.now()
        self.usage = Usage()
        self.display = StatusLine(rt)

    def sample(self, nodes: int) -> None:
        self.usage = self.usage.sample(self.rt.now(), nodes)

    def text(self, phase: str) -> str:
        return status_text(phase, self.rt.now() - self.started, self.usage, self.price)

    def summary(self) -> str:
        return summary_text(self.rt.now() - self.started, self.usage, self.price)

    def show(self, phase: str, detail: str = "") -> None:
        self.display.show(phase, self.text(phase) + (f" | {detail}" if detail else ""))


def run(
    stack: str,
    stacks: StackOps,
    cloud: RunCloud,
    rt: Runtime,
    *,
    keep: bool = False,
    project: Project | None = None,
    preview_fn: Callable[..., Any] = preview,
    quotas: QuotaSource | None = None,
    skip_quota_check: bool = False,
) -> int:
    """`quotas`: where an AWS run's quotas are read (None: not checked, e.g. on GCP); `skip_quota_check`: the
    user asked not to (--skip-quota-check), which is said."""
    project = project or load_project()
    config = load(training_stack_config(project, stack))  # bad config: InputError (exit 2), nothing issued
    subject = run_subject(config)
    checked = preview_fn(stack, (), project)
    if checked.errors:
        for diagnostic in checked.errors:
            rt.say(f"error: {diagnostic.message}")
        rt.say(f"run: the offline preview of {stack} has errors; nothing was deployed")
        return 1
    exists = stacks.exists(stack)
    if not (exists and stacks.outputs(stack)):  # not deployed: a new run, or one already torn down
        if skip_quota_check:
            rt.say("quota: not checked (--skip-quota-check)")
        elif quotas is not None and isinstance(config, TrainingStackConfig):
            check_quotas(config.training, quotas, rt)  # a need over its quota: InputError, nothing created
        registry_stack = config.registry_stack if isinstance(config, TrainingStackConfig) else None
        bucket = refuse_ended_run(stacks, cloud, subject, registry_stack)
        claim_run_id(stack, project.name, cloud, subject.run_id, bucket, rt)
    expires_at = fix_expiry(stack, stacks, subject, rt, exists=exists)
    progress = Progress(rt, subject.hourly_price)
    try:
        return _deploy_and_watch(stack, stacks, cloud, rt, subject, expires_at, progress, keep)
    except KeyboardInterrupt:
        progress.display.end()
        rt.say(
            f"interrupted: stack {stack} may still be deployed; {subject.cap(expires_at)}. Resume the teardown with: "
            f"python -m infra teardown --stack {stack}"
        )
        return 130
    except Exception as error:
        text = cloud_error(error)
        if text is None:
            raise
        progress.display.end()
        rt.say(
            f"error: {text}; stack {stack} may still be deployed; {subject.cap(expires_at)}. Resume the teardown with: "
            f"python -m infra teardown --stack {stack}"
        )
        return 1


def refuse_ended_run(stacks: StackOps, cloud: RunCloud, subject: RunSubject, registry: str | None) -> str:
    """The bucket of the run's markers; InputError when the run id already has a completion marker there (the
    registry, or on GCP the data bucket): a new run under it would see that marker at its first poll and be
    torn down at once."""
    run_id, bucket = subject.run_id, subject.data_bucket
    if registry is not None:
        bucket = stacks.outputs(registry).get("bucketName")
        if not bucket:
            raise InputError(
                Problem(
                    "mlinfra:registryStack",
                    f"stack {registry!r} has no bucketName output: deploy the registry first (nothing was deployed)",
                )
            )
    assert bucket is not None
    marker = cloud.marker(bucket, run_id)
    if marker is not None:
        raise InputError(
            Problem(
                RUN_ID,
                f"run {run_id!r} has already ended (runs/{run_id}/_{marker.status} is in "
                f"the registry); set a new runId for a new run and remove expiresAt "
                f"(nothing was deployed)",
            )
        )
    return bucket


def claim_run_id(stack: str, project: str, cloud: RunCloud, run_id: str, bucket: str, rt: Runtime) -> None:
    """Claim the run id for this stack in its registry (runs/<run-id>/_CLAIM, created only if absent); InputError
    when another stack holds it. Two stacks under one run id share the run's tag, so one's marker would end
    both fleets and one's teardown would stop the other's nodes: run ids are unique per registry."""
    mine = {"stack": f"{project}/{stack}", "claimed_at": iso(rt.now())}
    held = cloud.claim(bucket, run_id, mine)
    if held.get("stack") != mine["stack"]:
        raise InputError(
            Problem(
                RUN_ID,
                f"run id {run_id!r} belongs to stack {held.get('stack', 'unknown')!r} (runs/{run_id}/_CLAIM, "
                f"claimed {held.get('claimed_at', 'at an unknown time')}); run ids are unique per registry: set a "
                "new runId (nothing was deployed)",
            )
        )
    if held != mine:
        rt.say(f"run id {run_id}: claimed by this stack on {held.get('claimed_at', 'an earlier run')}")


def fix_expiry(stack: str, stacks: StackOps, subject: RunSubject, rt: Runtime, exists: bool | None = None) -> str:
    """The run's expires-at: the one in the stack's config, or now + ttlHours written there once."""
    now = rt.now()
    exists = stacks.exists(stack) if exists is None else exists
    current = lifecycle_config(stacks.config(stack)).get("expiresAt") if exists else subject.lifecycle.expires_at
    if current:
        at = parse_iso(current)
        if at is None:
            raise InputError(Problem(EXPIRES_AT, f"{current!r} is not a real UTC time (YYYY-MM-DDTHH:MM:SSZ)"))
        if at <= now:
            raise InputError(
                Problem(
                    EXPIRES_AT,
                    f"{current} has passed, so this run is over: tear it down with "
                    f"`python -m infra teardown --stack {stack}`; for a new run set a "
                    f"new runId and remove expiresAt",
                )
            )
        rt.say(f"expires-at: {current} (fixed when the run started; kept)")
        return str(current)
    text, _, problem = run_expiry(subject.lifecycle, now, dry_run=True)
    if problem:
        raise InputError(problem)
    stacks.set_config(stack, EXPIRES_AT, text)
    rt.say(f"expires-at: {text} (now + ttlHours {subject.lifecycle.ttl_hours:g}), written to the stack's config")
    return text


def _deploy_and_watch(
    stack: str,
    stacks: StackOps,
    cloud: RunCloud,
    rt: Runtime,
    subject: RunSubject,
    expires_at: str,
    progress: Progress,
    keep: bool,
) -> int:
    def engine_line(line: str) -> None:
        if rt.live:
            progress.show("deploying", line.strip()[:60])
        elif line.strip():
            rt.say(f"  {line}")

    progress.show("deploying")
    try:
        stacks.up(stack, engine_line)
    except StackOpsError as error:
        progress.display.line(f"up: {error}")
        if keep:
            rt.say(
                f"up: failed; the stack is kept (--keep): fix and run again, or "
                f"`python -m infra teardown --stack {stack}`"
            )
            return 1
        rt.say("up: failed; tearing down what was created so nothing is left running")
        _teardown(stack, stacks, cloud, rt, progress, subject.run_id)
        return 1
    outputs = stacks.outputs(stack)
    run_id = outputs.get("runId") or subject.run_id
    deadline = parse_iso(outputs.get("expiresAt")) or parse_iso(expires_at)
    assert deadline is not None
    progress.display.line(
        f"up: deployed run {run_id} ({subject.node_count} x {subject.machine_type}), expires-at {iso(deadline)}"
    )
    result = wait_for_end(cloud, rt, progress, run_id, marker_bucket(outputs), deadline)
    if result.ended == "cloud-failing":
        progress.display.line(
            f"wait: stopped waiting, {subject.cloud.upper()} still failing after {span(CLOUD_FAILING_GIVE_UP)} "
            f"({result.error}). Stack {stack} stays deployed; {subject.cap(iso(deadline))}. "
            f"Once the run has ended, or to end it now, finish with: python -m infra teardown --stack {stack}"
        )
        return 1
    progress.display.line(_ending(result, run_id, subject))
    succeeded = result.marker is not None and result.marker.status == "SUCCESS"
    inspect = not subject.lifecycle.teardown_on_completion and result.ended != "expired"
    if keep or inspect:
        why = "--keep" if keep else "teardownOnCompletion is false"
        rt.say(
            f"stack {stack} is kept ({why}) {subject.kept_until(iso(deadline))}; tear it down with "
            f"`python -m infra teardown --stack {stack}`"
        )
        code = 0
    else:
        code = _teardown(stack, stacks, cloud, rt, progress, run_id)
    outcome = (
        ("job succeeded" if succeeded else "job failed")
        if result.marker
        else {"expired": "stopped at expires-at", "nodes-gone": "nodes gone with no completion marker"}[result.ended]
    )
    rt.say(f"run {run_id}: {outcome}; {progress.summary()}")
    return 0 if succeeded and code == 0 else 1


def wait_for_end(
    cloud: RunCloud, rt: Runtime, progress: Progress, run_id: str, bucket: str | None, deadline: datetime
) -> WaitResult:
    """Poll the marker and the active nodes until the run ends or expires-at comes, or the cloud keeps failing
    for CLOUD_FAILING_GIVE_UP (each failure one line, retried with backoff)."""
    seen_nodes = False
    gone_since: datetime | None = None
    failing_since: datetime | None = None
    failures = 0
    while True:
        try:
            marker = cloud.marker(bucket, run_id) if bucket else None
            nodes = cloud.active_nodes(run_id)
        except Exception as error:
            text = cloud_error(error)
            if text is None:
                raise
            failures, failing_since = failures + 1, failing_since or rt.now()
            if rt.now() - failing_since >= CLOUD_FAILING_GIVE_UP:
                return WaitResult("cloud-failing", error=text)
            delay = min(CLOUD_RETRY_MAX_SECONDS, CLOUD_RETRY_FIRST_SECONDS * 2 ** (failures - 1))
            progress.display.line(f"wait: {text}; trying again in {span(timedelta(seconds=delay))}")
            rt.sleep(delay)
            continue
        failing_since, failures = None, 0
        progress.sample(nodes)
        now = rt.now()
        if marker is not None:
            return WaitResult("marker", marker)
        if now >= deadline:
            return WaitResult("expired")
        if nodes:
            seen_nodes, gone_since = True, None
        elif seen_nodes:
            gone_since = gone_since or now
            if now - gone_since >= NODES_GONE_AFTER:
                return WaitResult("nodes-gone")
        phase = "training" if nodes else ("nodes gone, waiting for the marker" if seen_nodes else "waiting for nodes")
        progress.show(phase)
        rt.sleep(WAIT_POLL_SECONDS)


def _ending(result: WaitResult, run_id: str, subject: RunSubject) -> str:
    if result.marker is not None:
        code = "" if result.marker.exit_code is None else f", exit code {result.marker.exit_code}"
        return f"job: ended, runs/{run_id}/_{result.marker.status}{code}"
    if result.ended == "expired":
        return f"job: expires-at reached; {subject.on_expiry}"
    return f"job: every node gone for {span(NODES_GONE_AFTER)} with no completion marker"


def _teardown(stack: str, stacks: StackOps, cloud: RunCloud, rt: Runtime, progress: Progress, run_id: str) -> int:
    progress.display.end()
    progress.sample(0)  # teardown's first step stops the compute; nodes still up were counted until now
    return teardown(stack, stacks, cloud, rt, run_id=run_id, on_phase=lambda phase: rt.say(progress.text(phase)))
