"""The AWS tag contract (docs/architecture.md): every taggable resource carries these."""

from __future__ import annotations

from typing import Literal

ROLE = "mlinfra:role"
STACK = "mlinfra:stack"
RUN_ID = "mlinfra:run-id"
EXPIRES_AT = "mlinfra:expires-at"

Role = Literal["registry", "training", "serving"]


def contract_tags(role: Role, stack: str, run_id: str | None = None, expires_at: str | None = None) -> dict[str, str]:
    if role == "training" and not (run_id and expires_at):
        raise ValueError("training resources need both a run id and an expires-at tag")
    tags = {ROLE: role, STACK: stack}
    if run_id:
        tags[RUN_ID] = run_id
    if expires_at:
        tags[EXPIRES_AT] = expires_at
    return tags


def missing_contract_tags(role: Role, tags: dict | None) -> list[str]:
    """Contract tag keys absent from `tags` (for checks over previews)."""
    required = [ROLE, STACK] + ([RUN_ID, EXPIRES_AT] if role == "training" else [])
    return [key for key in required if key not in (tags or {})]
