"""The guard's settings, from the Lambda's environment, and its timing constants.

The constants mirror infra/training/limits.py (a test keeps them equal); the guard cannot import it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

EXPORT_POLL_SECONDS = 60  # = limits.EXPORT_POLL_SECONDS
MAX_ROUNDS = 24  # invocations of one stop flow: ~6 h of export polling at 15 min each.
# Lambda's recursive loop detection stops a self-invocation chain after about 16 calls: more than 15
# rounds need the function's recursion config set to Allow (components/training/aws/run_guard.py does).
RECURSION_LIMIT_WITHOUT_ALLOW = 15
MAX_EXPORT_ATTEMPTS = 3  # export tasks tried after compute stopped before giving up (and keeping the data)
SAFETY_MILLIS = 20_000  # stop polling this long before the Lambda times out, to report and re-invoke

RUN_ID_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$"  # = infra.training.aws.config.RUN_ID_PATTERN
_BUCKET_PATTERN = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
_EXPIRES_AT_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$"  # = the mlinfra:expires-at tag's form
_PATH_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._=-]*(?:/[A-Za-z0-9][A-Za-z0-9._=-]*)*$"  # no "..", no leading "/"


class ConfigError(Exception):
    """The guard's environment is missing or invalid; the message names the variable and what is allowed."""


@dataclass(frozen=True)
class GuardConfig:
    run_id: str
    registry_bucket: str
    teardown_on_completion: bool
    export_checkpoints: bool
    # The deployment's expires-at (its mlinfra:expires-at tag): only its markers count, only its instances stop.
    expires_at: str = ""
    checkpoints_path: str = "checkpoints"

    @property
    def runs_prefix(self) -> str:
        return f"runs/{self.run_id}/"


def load_config(env: Mapping[str, str]) -> GuardConfig:
    """The settings from `env`, or ConfigError listing every problem."""
    problems: list[str] = []

    def text(name: str, pattern: str, allowed: str, default: str | None = None) -> str:
        value = env.get(name, default)
        if value is None or value == "":
            problems.append(f"{name} is not set: {allowed}")
            return ""
        if not re.fullmatch(pattern, value):
            problems.append(f"{name}={value!r} is invalid: {allowed}")
        return value

    def flag(name: str) -> bool:
        value = env.get(name)
        if value not in ("true", "false"):
            problems.append(
                f"{name}={value!r} is invalid: 'true' or 'false'"
                if value is not None
                else f"{name} is not set: 'true' or 'false'"
            )
        return value == "true"

    config = GuardConfig(
        run_id=text("MLINFRA_RUN_ID", RUN_ID_PATTERN, "lowercase letters, digits and '-', up to 40 characters"),
        registry_bucket=text("MLINFRA_REGISTRY_BUCKET", _BUCKET_PATTERN, "an S3 bucket name"),
        teardown_on_completion=flag("MLINFRA_TEARDOWN_ON_COMPLETION"),
        export_checkpoints=flag("MLINFRA_EXPORT_CHECKPOINTS"),
        expires_at=text("MLINFRA_EXPIRES_AT", _EXPIRES_AT_PATTERN, "the run's expires-at, like 2026-11-22T08:00:00Z"),
        checkpoints_path=text(
            "MLINFRA_CHECKPOINTS_PATH",
            _PATH_PATTERN,
            "a path relative to the Lustre root, like 'checkpoints'",
            default="checkpoints",
        ),
    )
    if problems:
        raise ConfigError("run guard misconfigured: " + "; ".join(problems))
    return config
