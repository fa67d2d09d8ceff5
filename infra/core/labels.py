"""GCP names and labels derived from mlinfra's own (pure): the contract tags as labels, and service account ids.

One place for both clouds' GCP stacks (serving, training, the registry mirror) and the lifecycle's audit, so a
resource is always named and labelled the way the audit looks for it."""

from __future__ import annotations

import hashlib
import re


def label_value(text: str) -> str:
    """A label key or value: lowercase letters, digits, '_' and '-' only, at most 63 characters; every other
    character becomes '-' (`mlinfra:run-id` -> `mlinfra-run-id`, `2026-11-22T08:00:00Z` -> `2026-11-22t08-00-00z`)."""
    return re.sub(r"[^a-z0-9_-]", "-", text.lower())[:63]


def gcp_labels(tags: dict[str, str]) -> dict[str, str]:
    """GCP labels from the contract tags (`expires_at_from_label` reverses the expiry's)."""
    return {label_value(k): label_value(v) for k, v in tags.items()}


_LABEL_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})t(\d{2})-(\d{2})-(\d{2})z$")


def expires_at_from_label(value: str) -> str | None:
    """The ISO-8601 UTC expiry from its label form; None if it is not one."""
    match = _LABEL_TIME.match(value)
    return f"{match.group(1)}T{match.group(2)}:{match.group(3)}:{match.group(4)}Z" if match else None


def account_id(prefix: str, name: str, hashed: bool = True) -> str:
    """A GCP service account id (6-30 chars, lowercase letters, digits, '-', starting with a letter). A name too
    long for 30 characters keeps its first 23 and a hash of the whole: two names sharing those 23 get two accounts
    (cut alone, the second `up` would fail half-created on the taken id, or two runs would share one identity).
    `hashed` False keeps the plain cut, for an account a deployed resource cannot change in place (a GKE node
    pool's: a new one would replace the pools)."""
    full = re.sub(r"[^a-z0-9-]", "-", f"{prefix}-{name}".lower()).strip("-")
    if len(full) > 30 and not hashed:
        full = full[:30].strip("-")
    if len(full) > 30:
        digest = hashlib.sha256(f"{prefix}-{name}".encode()).hexdigest()[:6]
        return f"{full[:23].rstrip('-')}-{digest}"
    return full if len(full) >= 6 else (full + "-sa-000")[:6]
