"""The GCP guard's settings, from the function's environment, and its timing constants.

The constants mirror infra/training/limits.py (a test keeps them equal); the guard cannot import it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

TICK_SECONDS = 60  # = limits.GCP_GUARD_TICK_SECONDS: the Cloud Scheduler job publishes a tick every minute
RETRY_WINDOW_SECONDS = 900  # = limits.GUARD_RETRY_WINDOW_SECONDS: a marker event is retried this long, no longer
EXPORT_MAX_SECONDS = 21600  # = limits.GCP_GUARD_EXPORT_MAX_SECONDS: an export still running after this is given up

RUN_ID_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$"  # = infra.training.spec's run id
_PROJECT = r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$"
_BUCKET = r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$"
_INSTANCE = r"^projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/locations/[a-z0-9-]+/instances/[a-z][a-z0-9-]{0,62}$"
_LABEL = r"^[a-z][a-z0-9_-]{0,62}=[a-z0-9_-]{0,63}$"
_EXPIRES_AT = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$"


class ConfigError(Exception):
    """The guard's environment is missing or invalid; the message names the variable and what is allowed."""


@dataclass(frozen=True)
class GuardConfig:
    project: str
    run_id: str
    data_bucket: str
    lustre_instance: str  # full name: projects/<p>/locations/<zone>/instances/<id>
    run_label: tuple[str, str]  # the label every node and the file system carry: (key, value)
    expires_at: datetime
    teardown_on_completion: bool
    export_checkpoints: bool

    @property
    def runs_prefix(self) -> str:
        return f"runs/{self.run_id}/"

    @property
    def reports_prefix(self) -> str:
        return f"runs/{self.run_id}/guard/"

    @property
    def destination(self) -> str:
        """Where /checkpoints goes: gs://<bucket>/checkpoints/<run-id>/ (= infra.training.gcp.plan.checkpoints_uri)."""
        return f"gs://{self.data_bucket}/checkpoints/{self.run_id}/"

    @property
    def instance_id(self) -> str:
        return self.lustre_instance.rsplit("/", 1)[-1]


def load_config(env: Mapping[str, str]) -> GuardConfig:
    """The settings from `env`, or ConfigError listing every problem."""
    problems: list[str] = []

    def text(name: str, pattern: str, allowed: str) -> str:
        value = env.get(name)
        if not value:
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

    label = text("MLINFRA_RUN_LABEL", _LABEL, "a GCP label as key=value, like mlinfra-run-id=my-run")
    expires = text("MLINFRA_EXPIRES_AT", _EXPIRES_AT, "an ISO-8601 UTC time like 2026-11-22T08:00:00Z")
    config = GuardConfig(
        project=text("MLINFRA_PROJECT", _PROJECT, "a GCP project id"),
        run_id=text("MLINFRA_RUN_ID", RUN_ID_PATTERN, "lowercase letters, digits and '-', up to 40 characters"),
        data_bucket=text("MLINFRA_DATA_BUCKET", _BUCKET, "a Cloud Storage bucket name"),
        lustre_instance=text(
            "MLINFRA_LUSTRE_INSTANCE", _INSTANCE, "a Managed Lustre instance as projects/P/locations/ZONE/instances/ID"
        ),
        run_label=tuple(label.split("=", 1)) if "=" in label else ("", ""),  # type: ignore[arg-type]
        expires_at=_utc(expires, problems),
        teardown_on_completion=flag("MLINFRA_TEARDOWN_ON_COMPLETION"),
        export_checkpoints=flag("MLINFRA_EXPORT_CHECKPOINTS"),
    )
    if problems:
        raise ConfigError("run guard misconfigured: " + "; ".join(problems))
    return config


def _utc(text: str, problems: list[str]) -> datetime:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        if text and re.fullmatch(_EXPIRES_AT, text):
            problems.append(f"MLINFRA_EXPIRES_AT={text!r} is invalid: not a real time")
        return datetime.max.replace(tzinfo=UTC)
