"""The two small interfaces promotion drives besides the Pulumi stacks (lifecycle.ports.StackOps):
the registry's objects and the serving cluster's Jobs. Tests use recording stand-ins; the real
adapters are `s3.S3Store` (boto3) and `kube.KubectlJobs` (kubectl)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Optional, Protocol


@dataclass(frozen=True)
class StoredObject:
    key: str
    size: int
    last_modified: str  # ISO-8601 UTC


class ObjectStore(Protocol):
    bucket: str

    def get(self, key: str) -> Optional[bytes]:
        """The object's current version, or None when there is none."""
    def put(self, key: str, body: bytes) -> None:
        """A new object version (JSON); earlier versions stay in the versioned bucket. Never deletes."""
    def list(self, prefix: str) -> list[StoredObject]: ...


@dataclass(frozen=True)
class JobState:
    state: Literal["pending", "running", "succeeded", "failed"]
    detail: str = ""


class Jobs(Protocol):
    def apply(self, objects: list[dict[str, Any]]) -> None:
        """Create (or leave as they are) the given Kubernetes objects, in order."""
    def state(self, namespace: str, name: str) -> JobState: ...
