"""Reads the whole `mlinfra` namespace from the running Pulumi program's config.

`pulumi.Config` only answers for keys it is asked about; to reject unknown keys we need all of them,
which the Python runtime keeps in its config map (set from PULUMI_CONFIG by the language host).
"""
from __future__ import annotations

from typing import Any

from pulumi.runtime import config as runtime_config


def runtime_values() -> dict[str, Any]:
    # Config set in-process (the offline engine, tests) is the whole config; otherwise the language host's.
    return dict(runtime_config.CONFIG.get()) or runtime_config.get_config_env()
