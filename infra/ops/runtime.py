"""What the operations (lifecycle, promotion) need from the machine they run on: a clock, a way to wait, a place to
print. Injected, so tests run a day-long run in milliseconds."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TextIO

from infra.training.spec import EXPIRES_AT_FORMAT as ISO_FORMAT


@dataclass(frozen=True)
class Runtime:
    now: Callable[[], datetime]
    sleep: Callable[[float], None]
    stream: TextIO
    live: bool = False  # a terminal that can redraw one status line (not a pipe, not CI)

    def say(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()


def real_runtime(stream: TextIO = sys.stdout, live: bool = False) -> Runtime:
    return Runtime(now=lambda: datetime.now(UTC), sleep=time.sleep, stream=stream, live=live)


def terminal_runtime() -> Runtime:
    """The real clock on standard output; one redrawn status line on a terminal, plain lines in pipes and CI."""
    ci = os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")
    return real_runtime(sys.stdout, live=sys.stdout.isatty() and not ci)


def iso(at: datetime) -> str:
    return at.astimezone(UTC).strftime(ISO_FORMAT)


def parse_iso(text: object) -> datetime | None:
    """A `2026-11-22T08:00:00Z` time, or None when `text` is not one."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.strptime(text, ISO_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None


def cloud_error(error: BaseException) -> str | None:
    """`AWS: <code>: <message>` for a botocore error, `GCP: <reason>: <message>` for a Google API's (a
    cloud-side failure: throttling, expired or missing credentials, no network), None for anything else."""
    from botocore.exceptions import BotoCoreError, ClientError

    if isinstance(error, ClientError):
        details = error.response.get("Error", {}) if isinstance(error.response, dict) else {}
        code = details.get("Code") or type(error).__name__
        message = details.get("Message") or str(error)
        return f"AWS: {code}: {message}"
    if isinstance(error, BotoCoreError):
        return f"AWS: {type(error).__name__}: {error}"
    return _gcp_error(error)


def _gcp_error(error: BaseException) -> str | None:
    from google.auth.exceptions import GoogleAuthError

    from run_guard_gcp.api import GcpApiError

    if isinstance(error, GcpApiError):
        return f"GCP: {error}"
    return f"GCP: {type(error).__name__}: {error}" if isinstance(error, GoogleAuthError) else None


def span(delta: timedelta) -> str:
    """`2h 05m`, `4m 10s`, `12s`."""
    seconds = max(0, int(delta.total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"
