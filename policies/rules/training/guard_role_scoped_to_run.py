"""The run guard may destroy only its own run: in a training stack, every IAM statement that allows
ec2:TerminateInstances or fsx:DeleteFileSystem (by name or by wildcard) carries a StringEquals
condition on aws:ResourceTag/mlinfra:run-id equal to the run's id. Without it, one run's guard (or
any role of the stack) can terminate every other run's nodes and delete their file systems."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from infra.core.tags import RUN_ID
from policies.model import Finding, Stack, StackRule
from policies.readers.aws import (
    IAM_POLICY,
    IAM_ROLE,
    IAM_ROLE_POLICY,
    Statement,
    as_list,
    iam_documents,
    run_tag,
    stack_role,
    statements,
)

NAME = "guard-role-scoped-to-run"
DESTRUCTIVE = ("ec2:TerminateInstances", "fsx:DeleteFileSystem")
CONDITION_KEY = f"aws:ResourceTag/{RUN_ID}"


def _covers(pattern: str, action: str) -> bool:
    regex = ".*".join(re.escape(part) for part in pattern.split("*")).replace(r"\?", ".")
    return re.fullmatch(regex, action, re.IGNORECASE) is not None


def destructive_actions(st: Statement) -> list[tuple[str, str]]:
    """(granted as, action) for each destructive action an Allow statement grants."""
    if st.effect != "Allow":
        return []
    if "NotAction" in st.raw:
        excluded = [str(a) for a in as_list(st.raw.get("NotAction"))]
        return [("NotAction", a) for a in DESTRUCTIVE if not any(_covers(p, a) for p in excluded)]
    granted = []
    for action in DESTRUCTIVE:
        pattern = next((p for p in st.actions if _covers(p, action)), None)
        if pattern is not None:
            granted.append((pattern, action))
    return granted


def scoped_value(st: Statement) -> list[Any] | None:
    """The values of the statement's StringEquals condition on the run-id tag; None when it has none."""
    condition = st.raw.get("Condition")
    equals = condition.get("StringEquals") if isinstance(condition, dict) else None
    if not isinstance(equals, dict):
        return None
    for key, value in equals.items():
        if str(key).lower() == CONDITION_KEY.lower():
            return as_list(value)
    return None


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    run_id = run_tag(stack, RUN_ID)
    if stack_role(stack) != "training" or run_id is None:
        return []
    fix = f'add Condition StringEquals {{"{CONDITION_KEY}": "{run_id}"}} so it acts only on this run\'s resources'
    findings = []
    for resource in stack.of_type(IAM_ROLE, IAM_ROLE_POLICY, IAM_POLICY):
        for where, document in iam_documents(resource):
            for st in statements(document):
                granted = destructive_actions(st)
                if not granted:
                    continue
                what = ", ".join(a if p.lower() == a.lower() else f"{a} (through '{p}')" for p, a in granted)
                values = scoped_value(st)
                if values is None:
                    findings.append(
                        Finding(
                            resource.urn,
                            (
                                f"{resource.label} {where} statement {st.sid} allows {what} with no condition "
                                f"on the run's "
                                f"tag, so it reaches every run's resources; {fix}"
                            ),
                        )
                    )
                elif values != [run_id]:
                    findings.append(
                        Finding(
                            resource.urn,
                            (
                                f"{resource.label} {where} statement {st.sid} allows {what} for {RUN_ID} "
                                f"{', '.join(repr(v) for v in values)}, but this run is '{run_id}'; {fix}"
                            ),
                        )
                    )
    return findings


RULE = StackRule(
    NAME,
    "Training-stack IAM statements that terminate instances or delete file systems are scoped to the run's tag.",
    "mandatory",
    check,
)
