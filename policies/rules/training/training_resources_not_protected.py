"""Nothing in a training stack is protected: the stack is destroyed after every run, and a protected
resource stops the teardown while the rest keeps billing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.model import Finding, Stack, StackRule
from policies.readers.aws import stack_role

NAME = "training-resources-not-protected"


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    if stack_role(stack) != "training":
        return []
    return [
        Finding(
            r.urn,
            f"{r.label} is protected, but training stacks are destroyed after each run; drop "
            "protect (what must outlive the run belongs in the registry stack)",
        )
        for r in stack.resources
        if r.protect
    ]


RULE = StackRule(NAME, "Training stacks protect no resource.", "mandatory", check)
