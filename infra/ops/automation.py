"""`StackOps` on the Pulumi Automation API: a LocalWorkspace on the project directory, driving the CLI.

Stack files stay where the project keeps them (Pulumi.yaml `stackConfigDir: stacks`), so `set_config`
edits `stacks/Pulumi.<stack>.yaml` exactly as `pulumi config set --path` would, and `remove` keeps that
file (`--preserve-config`): it is the run's definition, checked in with the project.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pulumi import automation as auto

from infra.core.project import ROOT
from infra.ops.lifecycle.ports import OnOutput, StackOpsError

T = TypeVar("T")
NO_CLI = "the pulumi CLI was not found; install it (https://www.pulumi.com/docs/install/) and put it on PATH"


class PulumiUnavailable(StackOpsError):
    """No usable Pulumi CLI: not one stack's failure, so the message stands alone."""

    def __init__(self, message: str):
        super().__init__("version", "", message)

    def __str__(self) -> str:
        return self.output


class AutomationStacks:
    """The project's stacks through `pulumi.automation`; every CLI failure becomes a `StackOpsError`."""

    def __init__(self, project_dir: Path = ROOT, pulumi_root: str | None = None, env: Mapping[str, str] | None = None):
        self._project_dir = str(project_dir)
        self._pulumi_root = pulumi_root
        self._env = dict(env or {})
        self._workspace: auto.LocalWorkspace | None = None

    def list_stacks(self) -> list[str]:
        summaries = self._call("stack ls", "", lambda ws: ws.list_stacks())
        # A backend may report "org/project/stack"; the project's stacks are named by their last part.
        return [summary.name.rsplit("/", 1)[-1] for summary in summaries]

    def exists(self, stack: str) -> bool:
        return stack in self.list_stacks()

    def config(self, stack: str) -> dict[str, Any]:
        values = self._call("config", stack, lambda ws: ws.get_all_config(stack))
        return {key: structured(value.value) for key, value in values.items()}

    def set_config(self, stack: str, path: str, value: str) -> None:
        # create_or_select: before a stack's first `up` it exists only as its file in stacks/.
        self._call(
            "config set",
            stack,
            lambda ws: auto.Stack.create_or_select(stack, ws).set_config(
                path, auto.ConfigValue(value=value), path=True
            ),
        )

    def up(self, stack: str, on_output: OnOutput) -> None:
        self._call(
            "up",
            stack,
            lambda ws: auto.Stack.create_or_select(stack, ws).up(
                on_output=on_output, on_error=on_output, color="never"
            ),
        )

    def destroy(self, stack: str, on_output: OnOutput) -> None:
        # --refresh: what the run guard already deleted (instances, the file system) leaves the state
        # first instead of failing the delete; --continue-on-error: one security group still held
        # (DependencyViolation) does not spare everything else, so a retry has less left to do.
        self._call(
            "destroy",
            stack,
            lambda ws: auto.Stack.select(stack, ws).destroy(
                on_output=on_output, on_error=on_output, color="never", refresh=True, continue_on_error=True
            ),
        )

    def outputs(self, stack: str) -> dict[str, Any]:
        values = self._call("stack output", stack, lambda ws: ws.stack_outputs(stack))
        return {key: value.value for key, value in values.items()}

    def remove(self, stack: str) -> None:
        self._call("stack rm", stack, lambda ws: ws.remove_stack(stack, preserve_config=True))

    def holds(self, stack: str, resource_ids: Sequence[str]) -> bool:
        deployment = self._call("stack export", stack, lambda ws: ws.export_stack(stack)).deployment or {}
        held = {r.get("id") for r in deployment.get("resources", []) if isinstance(r, dict)}
        return any(resource_id in held for resource_id in resource_ids)

    def _call(self, operation: str, stack: str, action: Callable[[auto.LocalWorkspace], T]) -> T:
        try:
            return action(self._local_workspace())
        except auto.CommandError as error:
            raise StackOpsError(operation, stack, str(error)) from None

    def _local_workspace(self) -> auto.LocalWorkspace:
        """Built on first use: constructing the command runs `pulumi version`."""
        if self._workspace is None:
            try:
                command = auto.PulumiCommand(root=self._pulumi_root)
            except OSError as error:
                raise PulumiUnavailable(f"{NO_CLI} ({error.strerror})") from None
            except (auto.InvalidVersionError, subprocess.CalledProcessError) as error:
                raise PulumiUnavailable(f"the pulumi CLI cannot be used: {error}") from None
            self._workspace = auto.LocalWorkspace(
                work_dir=self._project_dir, env_vars=self._env, pulumi_command=command
            )
        return self._workspace


def structured(value: Any) -> Any:
    """Config values come back as strings; objects and lists as JSON text (`pulumi config --json`)."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value
