"""FSx for Lustre reaches S3 through data repository associations, not the creation-time importPath /
exportPath (which PERSISTENT_2 does not support and which cannot change without replacing the file system)."""

from __future__ import annotations

from policies.model import Resource, ResourceRule
from policies.readers.aws import LUSTRE

NAME = "lustre-linked-through-data-repository-associations"
_FIELDS = ("importPath", "exportPath", "autoImportPolicy")


def check(resource: Resource) -> list[str]:
    used = [f for f in _FIELDS if resource.get(f) is not None]
    if not used:
        return []
    return [
        f"{', '.join(used)} {'links' if len(used) == 1 else 'link'} S3 at creation; remove "
        f"{'it' if len(used) == 1 else 'them'} and link the registry through "
        "aws:fsx/dataRepositoryAssociation resources (up to 8, with import and export policies)"
    ]


RULE = ResourceRule(
    NAME, "FSx for Lustre links S3 through data repository associations only.", "mandatory", (LUSTRE,), check
)
