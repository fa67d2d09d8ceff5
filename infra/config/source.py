"""Reads the whole `mlinfra` namespace from the running Pulumi program's config.

`pulumi.Config` only answers for keys it is asked about; to reject unknown keys we need all of them,
which the Python runtime keeps in its config map (set from PULUMI_CONFIG by the language host).
"""
from __future__ import annotations

from typing import Any

from pulumi.runtime import config as runtime_config


def runtime_values() -> dict[str, Any]:
    return {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
