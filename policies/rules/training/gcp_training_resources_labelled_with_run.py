"""In a GCP training stack, the nodes and the file system carry the run's labels - the contract tags in GCP
label form: mlinfra-role, mlinfra-stack, mlinfra-run-id and mlinfra-expires-at (an ISO time written
label-safe, e.g. 2026-11-22t08-00-00z) - so the run's resources can be found, audited and reaped."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.core.labels import gcp_labels
from infra.core.tags import contract_tags
from policies.model import Finding, Stack, StackRule, is_unknown
from policies.readers.gcp_training import EXPIRES_AT_LABEL, INSTANCE, LUSTRE, label_expiry, labels, stack_is_training

NAME = "gcp-training-resources-labelled-with-run"
REQUIRED = tuple(gcp_labels(contract_tags("training", "s", run_id="r", expires_at="e")))


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    if not stack_is_training(stack):
        return []
    findings = []
    for resource in stack.of_type(INSTANCE, LUSTRE):
        if is_unknown(resource.get("labels")):
            continue
        missing = [k for k in REQUIRED if k not in labels(resource)]
        if missing:
            findings.append(
                Finding(
                    resource.urn,
                    (
                        f"{resource.label} lacks the run's labels {', '.join(missing)}; label every node and the file "
                        "system with the contract tags in GCP label form"
                    ),
                )
            )
        elif label_expiry(resource) is None:
            findings.append(
                Finding(
                    resource.urn,
                    (
                        f"{resource.label} has {EXPIRES_AT_LABEL} {labels(resource)[EXPIRES_AT_LABEL]!r}, "
                        f"which is not a UTC "
                        "time in label form (e.g. 2026-11-22t08-00-00z)"
                    ),
                )
            )
    return findings


RULE = StackRule(NAME, "GCP training nodes and file systems carry the run id and expiry labels.", "mandatory", check)
