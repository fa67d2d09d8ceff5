"""Reading GCP training resources as the training rules need them (pure): which resources are a run's,
its labels (the contract tags in GCP label form, see infra/gcp_naming.gcp_labels)."""

from __future__ import annotations

from typing import Any

from infra.core.labels import expires_at_from_label, gcp_labels
from infra.core.tags import EXPIRES_AT, ROLE, RUN_ID
from infra.providers import tokens
from policies.model import Resource, Stack, is_unknown

INSTANCE = tokens.GCP_COMPUTE_INSTANCE
RESOURCE_POLICY = tokens.GCP_COMPUTE_RESOURCE_POLICY
LUSTRE = tokens.GCP_LUSTRE_INSTANCE
ROLE_LABEL, RUN_ID_LABEL, EXPIRES_AT_LABEL = (next(iter(gcp_labels({k: "x"}))) for k in (ROLE, RUN_ID, EXPIRES_AT))


def labels(resource: Resource) -> dict[str, Any]:
    value = resource.get("labels")
    return value if isinstance(value, dict) else {}


def is_training(resource: Resource) -> bool:
    return labels(resource).get(ROLE_LABEL) == "training"


def stack_is_training(stack: Stack) -> bool:
    return any(is_training(r) for r in stack.of_type(INSTANCE, LUSTRE))


def label_expiry(resource: Resource) -> str | None:
    """The ISO-8601 expiry a resource's label carries; None when absent, unknown or not a time."""
    value = labels(resource).get(EXPIRES_AT_LABEL)
    return None if value is None or is_unknown(value) else expires_at_from_label(str(value))
