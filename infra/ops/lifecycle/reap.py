"""`reap`: find training stacks past their expires-at and tear them down (a dry run unless told).

The decision is a pure planner over facts gathered once (`plan_reap`, tested with a fixed clock);
the executor only gathers the facts, prints the plan and, with `--execute`, runs the teardown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from infra.core.errors import InputError
from infra.ops.lifecycle.ports import RunCloud, StackOps, StackOpsError
from infra.ops.lifecycle.teardown import lifecycle_config, teardown
from infra.ops.runtime import Runtime, cloud_error, iso, parse_iso, span
from infra.training.spec import EXPIRES_AT_KEY

Action = Literal["reap", "keep", "skip", "problem"]
EXPIRES_AT = EXPIRES_AT_KEY


@dataclass(frozen=True)
class StackFacts:
    """What the planner knows of one stack."""

    name: str
    kind: str | None
    deployed: bool = False  # the last deployment left outputs
    expires_at_output: str | None = None  # the `expiresAt` output: what the resources were tagged with
    expires_at_config: str | None = None
    unreadable: str | None = None  # why the facts could not be read


@dataclass(frozen=True)
class ReapDecision:
    stack: str
    action: Action
    reason: str


# Kinds reap knows are not training stacks: listed nowhere, never reaped.
NOT_TRAINING = ("registry", "serving")


def plan_reap(stacks: list[StackFacts], now: datetime) -> list[ReapDecision]:
    """One decision per training stack, and per deployed stack it cannot classify (other kinds are not reaped
    and not listed), in name order."""
    return [
        _decide(facts, now)
        for facts in sorted(stacks, key=lambda f: f.name)
        if facts.kind == "training" or facts.unreadable or (facts.kind not in NOT_TRAINING and facts.deployed)
    ]


def _decide(facts: StackFacts, now: datetime) -> ReapDecision:
    def decision(action: Action, reason: str) -> ReapDecision:
        return ReapDecision(facts.name, action, reason)

    if facts.unreadable:
        return decision("problem", f"cannot read the stack: {facts.unreadable}")
    if facts.kind != "training":
        what = f"mlinfra:kind {facts.kind!r}" if facts.kind else "no mlinfra:kind"
        return decision(
            "problem",
            f"deployed, but its config has {what}: reap cannot tell whether it is a training run that still bills; "
            "restore its stack file, or tear it down with `pulumi destroy`",
        )
    # The deployed value wins: it is what the guard's schedule and the resources' tags carry.
    text, source = (
        (facts.expires_at_output, "output")
        if facts.expires_at_output is not None
        else (facts.expires_at_config, "config")
    )
    if text is None:
        if not facts.deployed:
            return decision("skip", "never deployed, and no expiresAt")
        return decision(
            "problem",
            f"deployed with no expiresAt in its outputs or config; set {EXPIRES_AT} "
            "or tear it down with `python -m infra teardown`",
        )
    expires_at = parse_iso(text)
    if expires_at is None:
        return decision("problem", f"expiresAt {text!r} ({source}) is not a UTC time like 2026-11-22T08:00:00Z")
    if now >= expires_at:
        return decision("reap", f"expired at {iso(expires_at)}, {span(now - expires_at)} ago")
    return decision("keep", f"expires at {iso(expires_at)}, in {span(expires_at - now)}")


def gather(stacks: StackOps) -> list[StackFacts]:
    """Facts of every stack the backend holds for this project."""
    found = []
    for name in stacks.list_stacks():
        try:
            config = stacks.config(name)
            kind = config.get("mlinfra:kind")
            outputs = stacks.outputs(name) if kind not in NOT_TRAINING else {}
        except StackOpsError as error:
            found.append(StackFacts(name, kind=None, unreadable=str(error)))
            continue
        found.append(
            StackFacts(
                name,
                kind=kind if isinstance(kind, str) else None,
                deployed=bool(outputs),
                expires_at_output=_text(outputs.get("expiresAt")),
                expires_at_config=_text(lifecycle_config(config).get("expiresAt")),
            )
        )
    return found


def reap(stacks: StackOps, cloud_for: Callable[[str], RunCloud], rt: Runtime, execute: bool) -> int:
    """Print the plan; with `execute`, tear down every expired stack (`cloud_for(stack)`: the cloud side of
    that stack's run, AWS or GCP). 1 when a stack needs a human."""
    decisions = plan_reap(gather(stacks), rt.now())
    if not decisions:
        rt.say("reap: no training stacks")
        return 0
    width = max(len(d.stack) for d in decisions)
    for d in decisions:
        rt.say(f"{d.action:<7}  {d.stack:<{width}}  {d.reason}")
    expired = [d for d in decisions if d.action == "reap"]
    failed = [d.stack for d in decisions if d.action == "problem"]
    if not execute:
        if expired:
            rt.say(f"dry run: {len(expired)} stack(s) would be torn down; `python -m infra reap --execute` does it")
        return 1 if failed else 0
    for d in expired:
        rt.say(f"reap: tearing down {d.stack}")
        try:
            code = teardown(d.stack, stacks, cloud_for(d.stack), rt)
        except Exception as error:
            rt.say(f"reap: {d.stack}: {failure_text(error)}")
            code = 1
        if code != 0:
            failed.append(d.stack)
    if failed:
        rt.say(f"reap: needs attention: {', '.join(failed)}")
    return 1 if failed else 0


def failure_text(error: Exception) -> str:
    """One line for a stack's failed teardown: our own errors as they read, the cloud's with its code."""
    if isinstance(error, (StackOpsError, InputError)):
        return str(error)
    return cloud_error(error) or f"{type(error).__name__}: {error}"


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
