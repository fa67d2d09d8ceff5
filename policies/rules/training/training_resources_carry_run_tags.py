"""Every taggable resource of a training stack carries the run tags (infra.core.tags contract), so teardown
and the cloud-side run guard find everything a run left behind."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.core.tags import missing_contract_tags
from infra.providers.schema import has_input
from policies.model import Finding, Stack, StackRule, is_unknown
from policies.readers.aws import stack_role

NAME = "training-resources-carry-run-tags"


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    if stack_role(stack) != "training":
        return []
    findings = []
    for resource in stack.resources:
        tags = resource.get("tags")
        if is_unknown(tags) or not has_input(resource.type, "tags"):
            continue
        missing = missing_contract_tags("training", tags if isinstance(tags, dict) else {})
        if missing:
            findings.append(
                Finding(
                    resource.urn,
                    (
                        f"{resource.label} lacks tag{'s' if len(missing) > 1 else ''} {', '.join(missing)}; "
                        f"tag it with "
                        "infra.core.tags.contract_tags('training', stack, run_id, expires_at)"
                    ),
                )
            )
    return findings


RULE = StackRule(NAME, "Taggable training resources carry role, stack, run-id and expires-at tags.", "mandatory", check)
