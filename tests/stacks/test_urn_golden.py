"""No demo stack's resource would be replaced by a change of code layout or component type token: every URN the
stack had before the house move (tests/stacks/golden/<stack>.urns, taken at commit 3faaab4) is still declared,
with the same type, or is one of the URNs its resource answers to through the aliases the engine computes (a
component's former type, inherited by all its children)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from infra.core.project import load_project
from infra.tools.offline.engine import preview
from infra.tools.offline.recording import Registration
from tests.helpers import ROOT

GOLDEN = ROOT / "tests" / "stacks" / "golden"
STACKS = sorted(p.stem for p in GOLDEN.glob("*.urns"))


def _golden(stack: str) -> dict[str, str]:
    rows = [
        line.split(" ", 1)
        for line in (GOLDEN / f"{stack}.urns").read_text(encoding="utf-8").splitlines()
        if not line.startswith("#")
    ]
    return {urn: type_ for type_, urn in rows}


def _urn(stack_urn: str, parent_urn: str, type_: str, name: str) -> str:
    """The engine's URN rule: a child's type is qualified by its parent's type chain (the root stack excepted)."""
    prefix = stack_urn.rsplit("::", 2)[0]
    chain = parent_urn.split("::")[2] if parent_urn else "pulumi:pulumi:Stack"
    qualified = type_ if chain == "pulumi:pulumi:Stack" else f"{chain}${type_}"
    return f"{prefix}::{qualified}::{name}"


def _answers_to(steps: list[Registration]) -> dict[str, str]:
    """URN -> type of every URN each resource answers to: its own, and those its and its parents' aliases give."""
    by_urn = {s.urn: s for s in steps}
    stack_urn = next(s.urn for s in steps if s.type == "pulumi:pulumi:Stack")
    memo: dict[str, set[tuple[str, str]]] = {}

    def urns(step: Registration) -> set[tuple[str, str]]:
        if step.urn not in memo:
            parents = (
                urns(by_urn[step.parent])
                if step.parent in by_urn and by_urn[step.parent].type != "pulumi:pulumi:Stack"
                else {("", "")}
            )
            memo[step.urn] = {(step.urn, step.type)} | {
                (_urn(stack_urn, parent, type_, step.name), type_)
                for parent, _ in parents
                for type_ in (step.type, *step.alias_types)
            }
        return memo[step.urn]

    return {urn: type_ for step in steps for urn, type_ in urns(step)}


@pytest.mark.parametrize("stack", STACKS)
def test_every_urn_before_the_move_is_still_answered_to_with_its_type(stack):
    assert stack in load_project().stacks()
    # A fixed expiry (URNs do not depend on it), a day ahead so it is within the maximum lifetime.
    expires = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    overrides = [("mlinfra:training.lifecycle.expiresAt", expires)] if stack.startswith("training") else []
    now = _answers_to(preview(stack, overrides).steps)
    missing = {urn: type_ for urn, type_ in _golden(stack).items() if now.get(urn) != type_}
    assert missing == {}
