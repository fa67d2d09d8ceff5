"""Storage Transfer jobs copy the registry's models/ prefix only: datasets, checkpoints and runs never leave AWS."""

from __future__ import annotations

from infra.registry.gcp.mirror import mirrored_prefixes
from infra.registry.layout import MIRRORED_PREFIX
from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.gcp import block
from policies.readers.gcs import TRANSFER_JOB

NAME = "transfer-jobs-copy-models-only"


def check(resource: Resource) -> list[str]:
    spec = block(resource, "transferSpec")
    if is_unknown(spec):
        return []
    prefixes = mirrored_prefixes(spec)
    if any(is_unknown(p) for p in prefixes):
        return []
    outside = [p for p in prefixes if not p.startswith(MIRRORED_PREFIX)]
    if not outside:
        return []
    shown = ", ".join(repr(p) for p in outside)
    return [
        f"the transfer copies {shown} (source path + includePrefixes), outside {MIRRORED_PREFIX}; set the source "
        f"path to '{MIRRORED_PREFIX}' (or objectConditions.includePrefixes under it)"
    ]


RULE = ResourceRule(
    NAME, "Storage Transfer jobs copy the registry's models/ prefix only.", "mandatory", (TRANSFER_JOB,), check
)
