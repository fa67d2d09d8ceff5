"""Stack builders: one module per (kind, cloud) under aws/ and gcp/, named by the table in infra.kinds."""

from __future__ import annotations

import importlib
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from infra.core.errors import InputError
from infra.kinds import load, stack_kind


def build() -> None:
    """Entry point of the Pulumi program: validate all config first, then declare the stack's resources."""
    try:
        config = load(runtime_values())
        # Builders make every decision (and raise InputError) before declaring their first resource.
        importlib.import_module(stack_kind(config).builder).build(config)
    except InputError as error:
        # RunError ends the program with this message only: no traceback, nothing declared.
        raise pulumi.RunError(f"invalid mlinfra config:\n{error}") from None


def runtime_values() -> dict[str, Any]:
    """The whole config of the running program. `pulumi.Config` only answers for keys it is asked about; to
    reject unknown keys we need all of them, which the Python runtime keeps in its config map (set from
    PULUMI_CONFIG by the language host). Config set in-process (the offline engine, tests) is the whole config."""
    return dict(runtime_config.CONFIG.get()) or runtime_config.get_config_env()
