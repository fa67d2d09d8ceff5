"""Shared fixtures: the recording mocks (the offline engine's own runtime) for component tests."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from infra.tools.offline.engine import Preview, preview, run_program  # noqa: E402
from infra.tools.offline.schema import has_input  # noqa: E402


@pytest.fixture
def record() -> Callable[..., Preview]:
    """Run a function that declares resources under the recording mocks; returns what was registered."""

    def _record(program: Callable[[], None], config: dict[str, Any] | None = None, stack: str = "test") -> Preview:
        return run_program(program, stack=stack, config={"aws:region": "us-east-1", **(config or {})})

    return _record


@pytest.fixture(scope="session")
def registry_preview() -> Preview:
    return preview("registry")


def by_type(result: Preview, token: str) -> list:
    return [s for s in result.steps if s.type == token]


def one(result: Preview, token: str):
    found = by_type(result, token)
    assert len(found) == 1, f"expected one {token}, found {len(found)}"
    return found[0]


def taggable(step) -> bool:
    return step.custom and step.op == "create" and has_input(step.type, "tags")


def run_cli(*args: str, timeout: int = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m infra <args>` in a subprocess; `env` adds to (or with "" clears) the environment."""
    environ = {**os.environ, **(env or {})}
    environ = {k: v for k, v in environ.items() if v != ""}
    return subprocess.run([sys.executable, "-m", "infra", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=environ)
