"""Waiting on a promotion's Jobs (conversion, evaluation) and stopping them: one status line while they run."""

from __future__ import annotations

from datetime import datetime, timedelta

from infra.ops.progress import StatusLine
from infra.ops.promotion import jobs as job_objects
from infra.ops.promotion.ports import Jobs, JobState
from infra.ops.runtime import Runtime, span

POLL_SECONDS = 30
WAIT_LIMIT_SECONDS = job_objects.DEADLINE_SECONDS + 600  # the Jobs' own deadline fails them before this
UNSCHEDULABLE_LIMIT = timedelta(minutes=30)  # a pod nobody can place (nor scale up for) fails
FINISHED = ("succeeded", "failed")


def wait_for(
    cluster: Jobs,
    ns: str,
    names: dict[str, str],
    states: dict[str, JobState],
    rt: Runtime,
    doing: str = "converting",
) -> set[str]:
    """Poll the Jobs into `states` until all finished, one failed (the rest are then stopped by the caller),
    or the wait limit. A pod unschedulable for UNSCHEDULABLE_LIMIT fails its variant. Returns the variants
    counted as failed here whose Jobs are still in the cluster (to be deleted with the unfinished ones)."""
    display = StatusLine(rt)
    started = rt.now()
    unschedulable_since: dict[str, datetime] = {}
    stuck: set[str] = set()
    while True:
        now = rt.now()
        for variant, name in names.items():
            if states[variant].state in FINISHED:
                continue
            state = cluster.state(ns, name)
            if state.unschedulable:
                since = unschedulable_since.setdefault(variant, now)
                if now - since >= UNSCHEDULABLE_LIMIT:
                    stuck.add(variant)
                    state = JobState(
                        "failed",
                        f"its pod could not be scheduled for {span(now - since)}, and the "
                        f"cluster autoscaler added no node for it: {state.unschedulable}",
                    )
            else:
                unschedulable_since.pop(variant, None)
            states[variant] = state
        elapsed = rt.now() - started
        display.show(
            ",".join(s.state + ("!" if s.unschedulable else "") for s in states.values()),
            f"{doing} | {span(elapsed)} | " + ", ".join(shown(v, s) for v, s in states.items()),
        )
        if all(s.state in FINISHED for s in states.values()) or any(s.state == "failed" for s in states.values()):
            display.end()
            return stuck
        if elapsed.total_seconds() >= WAIT_LIMIT_SECONDS:
            display.end()
            late = {v for v, s in states.items() if s.state not in FINISHED}
            states.update({v: JobState("failed", f"not finished after {span(elapsed)}") for v in late})
            return stuck | late
        rt.sleep(POLL_SECONDS)


def shown(variant: str, state: JobState) -> str:
    if state.unschedulable:
        return f"{variant} unschedulable ({state.unschedulable[:160]})"
    return f"{variant} {state.state}"


def stop(
    cluster: Jobs,
    ns: str,
    names: dict[str, str],
    states: dict[str, JobState],
    rt: Runtime,
    stuck: frozenset[str] | set[str] = frozenset(),
) -> None:
    """Delete the Jobs this promotion created that have not finished, and the `stuck` ones (finished Jobs
    hold no node and keep their logs until their TTL). Deleting a Job deletes nothing in the registry."""
    for variant, state in states.items():
        if state.state in FINISHED and variant not in stuck:
            continue
        try:
            cluster.delete(ns, names[variant])
        except Exception as error:
            rt.say(
                f"could not delete job {ns}/{names[variant]}: {error}; delete it with `kubectl delete job "
                f"{names[variant]} -n {ns}`"
            )
            continue
        rt.say(f"deleted job {ns}/{names[variant]} ({variant} was {'stuck' if variant in stuck else state.state})")
        states[variant] = JobState("failed", f"deleted ({state.state})")  # stopped: not deleted twice


def record_failures(
    keys: list[str],
    names: dict[str, str],
    states: dict[str, JobState],
    failures: dict[str, str],
    job: str,
    stopped: str,
) -> None:
    """Into `failures`: each of `keys` whose Job failed (`job` <name> failed: why), and each that did not finish
    because another failed (`stopped`, its {} the failed ones)."""
    failed = sorted(key for key in keys if states[key].state == "failed")
    for key in keys:
        state = states[key]
        if state.state == "failed":
            failures[key] = f"{job} {names[key]} failed: {state.detail or 'no detail'}"
        elif state.state != "succeeded":
            failures[key] = stopped.format(", ".join(failed))
