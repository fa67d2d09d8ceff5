"""The two small interfaces promotion drives besides the Pulumi stacks (lifecycle.ports.StackOps):
the registry's objects and the serving cluster's Jobs. Tests use recording stand-ins; the real
adapters are `s3.S3Store` (boto3) and `kube.KubectlJobs` (kubectl)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol


@dataclass(frozen=True)
class StoredObject:
    key: str
    size: int
    last_modified: str  # ISO-8601 UTC


class Conflict(Exception):
    """A conditional write did not happen: the object exists (put_new) or changed since it was read
    (put_if_match). S3 answers 412 PreconditionFailed (or 409 ConditionalRequestConflict under a race)."""


class ObjectStore(Protocol):
    bucket: str

    def get(self, key: str) -> bytes | None:
        """The object's current version, or None when there is none."""

    def read(self, key: str) -> tuple[bytes, str] | None:
        """(body, ETag) of the current version, or None when there is none."""

    def put(self, key: str, body: bytes) -> None:
        """A new object version (JSON); earlier versions stay in the versioned bucket. Never deletes."""

    def put_new(self, key: str, body: bytes) -> None:
        """Create `key` only if it does not exist (If-None-Match: *); Conflict otherwise."""

    def put_if_match(self, key: str, body: bytes, etag: str) -> None:
        """A new version of `key` only if its current ETag is `etag` (If-Match); Conflict otherwise."""

    def list(self, prefix: str) -> list[StoredObject]: ...


@dataclass(frozen=True)
class JobState:
    state: Literal["pending", "running", "succeeded", "failed"]
    detail: str = ""
    unschedulable: str = ""  # pending: why the scheduler (and the cluster autoscaler) cannot place its pod


class Jobs(Protocol):
    def create(self, objects: list[dict[str, Any]]) -> None:
        """Create the given Kubernetes objects, in order; an error if one exists already (never adopts,
        never changes an existing object)."""

    def state(self, namespace: str, name: str) -> JobState: ...
    def delete(self, namespace: str, name: str) -> None:
        """Delete the Job and (in the background) its pods; nothing in the registry."""
