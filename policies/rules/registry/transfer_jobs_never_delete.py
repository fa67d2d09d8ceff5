"""Storage Transfer jobs never delete: not from the source (the registry is the source of truth) nor from the sink."""

from __future__ import annotations

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.gcp import block, flag
from policies.readers.gcs import TRANSFER_JOB

NAME = "transfer-jobs-never-delete"


def check(resource: Resource) -> list[str]:
    options = block(resource, "transferSpec", "transferOptions")
    if is_unknown(options):
        return []
    found = []
    if flag(options.get("deleteObjectsFromSourceAfterTransfer")) is True:
        found.append(
            "transferOptions.deleteObjectsFromSourceAfterTransfer is true, so the transfer deletes the "
            "registry's objects once copied; set it false (the registry is the source of truth)"
        )
    if flag(options.get("deleteObjectsUniqueInSink")) is True:
        found.append(
            "transferOptions.deleteObjectsUniqueInSink is true, so the transfer deletes mirrored objects "
            "servers may be reading; set it false (noncurrent versions expire by lifecycle rule)"
        )
    return found


RULE = ResourceRule(
    NAME, "Storage Transfer jobs delete nothing, at the source or in the sink.", "mandatory", (TRANSFER_JOB,), check
)
