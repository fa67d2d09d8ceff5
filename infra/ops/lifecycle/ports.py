"""The two small interfaces the lifecycle commands drive: Pulumi stacks and the run's cloud side.

`StackOps` narrows the Pulumi Automation API to what run/teardown/reap need; `RunCloud` is the cloud
side (completion marker, compute, checkpoint export, audit). Tests use recording stand-ins for both;
the real adapters are `automation.AutomationStacks`, `aws_cloud.AwsRunCloud` and `gcp_cloud.GcpRunCloud`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from infra.ops.runtime import parse_iso

OnOutput = Callable[[str], None]  # one line of engine output, for the progress display


class ComputeStillRunning(Exception):
    """The run's instances are still there after the stop's wait: nothing else was changed."""


class StackOpsError(Exception):
    """A Pulumi operation failed; `output` is what the engine printed (classified by teardown)."""

    def __init__(self, operation: str, stack: str, output: str):
        super().__init__(
            f"pulumi {operation} of stack {stack!r} failed: "
            f"{output.strip().splitlines()[-1] if output.strip() else 'no output'}"
        )
        self.operation, self.stack, self.output = operation, stack, output


class StackOps(Protocol):
    def list_stacks(self) -> list[str]: ...
    def exists(self, stack: str) -> bool: ...
    def config(self, stack: str) -> dict[str, Any]:
        """The stack's config as the stack file holds it: {"mlinfra:kind": "training", "mlinfra:training": {...}}."""

    def set_config(self, stack: str, path: str, value: str) -> None:
        """`pulumi config set --path <path> <value>` (path like "mlinfra:training.lifecycle.expiresAt")."""

    def up(self, stack: str, on_output: OnOutput) -> None: ...
    def destroy(self, stack: str, on_output: OnOutput) -> None: ...
    def outputs(self, stack: str) -> dict[str, Any]:
        """Stack outputs of the last deployment ({} if never deployed or destroyed)."""

    def remove(self, stack: str) -> None:
        """`pulumi stack rm` (only once the stack holds no resources)."""

    def holds(self, stack: str, resource_ids: Sequence[str]) -> bool:
        """Whether the stack's state still holds a resource with one of these cloud ids (a destroy that
        deleted it has removed it from the state)."""


@dataclass(frozen=True)
class Marker:
    """runs/<run-id>/_SUCCESS or _FAILED, as the node bootstrap writes it (infra.training.aws.userdata)."""

    status: Literal["SUCCESS", "FAILED"]
    exit_code: int | None = None
    checkpoints_exported: bool | None = None
    ended_at: str | None = None
    body: dict[str, Any] = field(default_factory=dict)
    expires_at: int | None = None  # Unix time of the writing deployment's expires-at; None: not said (older nodes)

    def written_by(self, expires_at: str | None) -> bool:
        """Whether the deployment whose expires-at is `expires_at` (ISO UTC) wrote this marker: a marker left by
        an earlier deployment of the same run id, or one that does not say, is not this deployment's."""
        moment = parse_iso(expires_at)
        return moment is not None and self.expires_at is not None and int(moment.timestamp()) == self.expires_at


@dataclass(frozen=True)
class ExportStatus:
    """Where the export of the run's /fsx/checkpoints to the registry stands."""

    # "deleting": the file system is being deleted (on AWS by the guard, after its export succeeded); wait
    # for it to be gone before destroying, or its network interfaces hold the security groups.
    # "missing": a file system the stack's outputs name is not found (and nothing shows it was exported before
    # it was deleted): a wrong region or account, or a deletion nobody recorded; never "nothing to export".
    # "nothing-linked": the file system has no data repository linked at all (never associated): nothing to export.
    state: Literal[
        "no-filesystem", "missing", "deleting", "started", "running", "succeeded", "failed", "nothing-linked"
    ]
    detail: str = ""
    task_id: str | None = None


@dataclass(frozen=True)
class Leftover:
    """A resource that still carries the run's tag (or belongs to the run) after teardown."""

    kind: str  # e.g. "ec2:network-interface", "logs:log-group", "fsx:backup"
    identifier: str  # ARN or id
    found_by: str  # "tagging-api", "fsx-backups", "log-groups", "network-interfaces", ...


@dataclass(frozen=True)
class StoppedCompute:
    """What stop_compute did: the instances it asked to terminate (or delete), and when (by the cloud's clock,
    ISO UTC) the last of the run's instances stopped; None when the cloud does not say. Exports must start
    after it."""

    instance_ids: tuple[str, ...] = ()
    stopped_at: str | None = None


class RunCloud(Protocol):
    def marker(self, bucket: str, run_id: str) -> Marker | None: ...
    def claim(self, bucket: str, run_id: str, claim: dict[str, str]) -> dict[str, Any]:
        """Write runs/<run-id>/_CLAIM with `claim` unless it exists (a conditional create, so two claims never
        both succeed); the claim that holds the run id afterwards, this one or the earlier one."""

    def active_nodes(self, run_id: str) -> int:
        """Instances tagged with the run that are pending or running (billing)."""

    def stop_compute(self, run_id: str) -> StoppedCompute:
        """Terminate every instance tagged with the run and return once none is left (not even shutting
        down), so nothing writes to the file system any more."""

    def export_checkpoints(self, run_id: str, since: str | None = None) -> ExportStatus:
        """One idempotent step of exporting the run's file system's /checkpoints to the registry: wait
        while any export task of the file system is pending or running; done when a run-tagged export
        task created at/after `since` (ISO UTC: when compute stopped), or one this object started,
        succeeded; otherwise start one."""

    def expect_file_systems(self, file_system_ids: Sequence[str], bucket: str | None = None) -> None:
        """The stack's outputs name these file systems: look them up by id too, so a tag or region
        mismatch cannot pass for "no file system left" and let a destroy skip the export; one that is not
        found is "missing" unless the run's reports in `bucket` show it was exported, then deleted."""

    def file_system_busy(self, run_id: str) -> str | None:
        """Why the run's file system cannot be destroyed yet (a data repository task pending or running, or the
        file system being deleted, e.g. by the run guard), or None when a destroy may delete it now."""

    def audit(self, run_id: str) -> list[Leftover]: ...


def claim_key(run_id: str) -> str:
    """runs/<run-id>/_CLAIM: which stack a run id belongs to in its registry (written once, by `run`)."""
    return f"runs/{run_id}/_CLAIM"


def parse_marker(status: str, body: bytes) -> Marker:
    """The marker's JSON (infra.training.aws.userdata's write_marker); an unreadable body still counts as the marker."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        data = None
    if not isinstance(data, dict):
        return Marker(status)  # type: ignore[arg-type]
    exit_code = data.get("exit_code")
    exported = data.get("checkpoints_exported")
    ended_at = data.get("ended_at")
    expires_at = data.get("expires_at")
    return Marker(
        status,  # type: ignore[arg-type]
        exit_code=exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
        checkpoints_exported=exported if isinstance(exported, bool) else None,
        ended_at=ended_at if isinstance(ended_at, str) else None,
        body=data,
        expires_at=expires_at if isinstance(expires_at, int) and not isinstance(expires_at, bool) else None,
    )


def iso_precise(moment: datetime) -> str:
    """ISO-8601 UTC with the fraction of a second kept (export cut-offs compare to the microsecond)."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
