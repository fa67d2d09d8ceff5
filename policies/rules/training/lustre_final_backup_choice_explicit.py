"""An FSx for Lustre file system states whether a final backup is taken when it is deleted: a backup
outlives the stack and is billed; its absence loses what was not exported."""

from __future__ import annotations

from policies.model import Resource, ResourceRule
from policies.readers.aws import LUSTRE

NAME = "lustre-final-backup-choice-explicit"


def check(resource: Resource) -> list[str]:
    if resource.get("skipFinalBackup") is not None:
        return []
    return [
        "skipFinalBackup is not set; choose explicitly: true for run scratch space whose data lives in "
        "the registry, false to keep a final backup (it outlives the stack and is billed)"
    ]


RULE = ResourceRule(NAME, "FSx for Lustre file systems set skipFinalBackup explicitly.", "mandatory", (LUSTRE,), check)
