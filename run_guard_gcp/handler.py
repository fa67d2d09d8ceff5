"""The function's work for one CloudEvent: read the config, take one step (guard.handle), log one line, and decide
whether a failure is worth Eventarc's retry.

A failed completion-marker event is raised (so Eventarc redelivers it) while it is younger than
RETRY_WINDOW_SECONDS; after that, and for every tick, a failure is reported under runs/<run-id>/guard/ (at most one
report an hour) and acknowledged: the next tick, a minute later, tries again anyway, and an endless retry of a
permanent error (RETRY_POLICY_RETRY retries for days) would only add load.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from run_guard_gcp import guard
from run_guard_gcp.api import GcpApi
from run_guard_gcp.config import RETRY_WINDOW_SECONDS, load_config


def handle_event(
    data: Any,
    environ: Mapping[str, str] = os.environ,
    api: GcpApi | None = None,
    now: Callable[[], datetime] = guard.utcnow,
) -> dict[str, Any]:
    config = load_config(environ)  # ConfigError names every bad variable
    api = api or GcpApi()
    try:
        result = guard.handle(data, config, api, now)
    except Exception as error:
        kind, _ = guard.classify(data, config)
        at, published = now(), guard.published_at(data)
        result = {
            "run_id": config.run_id,
            "trigger": kind,
            "action": "error",
            "at": guard.iso(at),
            "outcome": f"error: {type(error).__name__}: {error}",
        }
        retry = kind == "marker" and published is not None and (at - published).total_seconds() < RETRY_WINDOW_SECONDS
        try:  # one error report an hour at most, whatever the rate of failing events
            guard.Records(api, config).create(f"error-{at.strftime('%Y%m%dT%H')}.json", result)
        except Exception as write_error:
            result["report_error"] = str(write_error)
        print(json.dumps({"severity": "ERROR", "message": f"run guard {config.run_id}: {result['outcome']}", **result}))
        if retry:
            raise
        return result
    print(json.dumps({"severity": "INFO", "message": f"run guard {config.run_id}: {result['outcome']}", **result}))
    return result
