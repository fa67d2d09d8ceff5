"""Training writes only its own run's prefixes: in a training stack, every IAM statement that allows writing
S3 objects names object ARNs under `checkpoints/<run-id>/` or `runs/<run-id>/` only. Anything wider lets one
run's job replace another run's checkpoints, or a served model's weights, manifest or alias under models/,
which promotion alone writes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.core.tags import RUN_ID
from infra.registry.layout import ROOTS
from policies.model import Finding, Stack, StackRule
from policies.readers.aws import (
    IAM_POLICY,
    IAM_ROLE,
    IAM_ROLE_POLICY,
    iam_documents,
    listed,
    role_in_stack,
    run_tag,
    s3_object_key,
    s3_writes,
    statements,
)

NAME = "training-registry-writes-own-run-only"


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    run = run_tag(stack, RUN_ID)
    own = tuple(f"{ROOTS[root]}{run}/" for root in ("checkpoints", "runs")) if run else ()
    allowed_text = " or ".join(f"{ROOTS[root]}{run or '<run-id>'}/" for root in ("checkpoints", "runs"))
    findings = []
    for resource in stack.of_type(IAM_ROLE_POLICY, IAM_POLICY, IAM_ROLE):
        if role_in_stack(resource, stack) != "training":
            continue
        for where, document in iam_documents(resource):
            for st in statements(document):
                writes = sorted({a for a in st.actions if s3_writes(a)}) if st.effect == "Allow" else []
                if not writes:
                    continue
                if "NotResource" in st.raw:
                    wide = ["NotResource (every object but those listed)"]
                else:
                    wide = [r for r in st.resources if not _own(r, own)]
                if wide:
                    findings.append(
                        Finding(
                            resource.urn,
                            f"training {where} of {resource.label} allows {', '.join(writes)} on {listed(wide)}; "
                            f"a run writes only {allowed_text} (models/ is promotion's): grant with "
                            "RegistryAccess.grant_write(role, <the run's prefixes>)",
                        )
                    )
    return findings


def _own(arn: str, own: tuple[str, ...]) -> bool:
    """An object ARN under one of the run's prefixes (a KMS key or a bucket ARN is not an S3 object write)."""
    if ":s3:::" not in arn:
        return True  # kms:GenerateDataKey and friends are judged by registry-access-without-wildcards
    key = s3_object_key(arn)
    return bool(own) and key.startswith(own) and ".." not in key


RULE = StackRule(
    NAME, "Training roles write only their own run's checkpoints and markers, never models/.", "mandatory", check
)
