"""Fixtures shared by every test: the recording mocks (the offline engine's own runtime) for component
tests, and the registry stack's preview. Plain helpers live in tests/helpers.py."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import botocore.loaders
import botocore.session
import pytest

from infra.tools.offline.engine import Preview, preview, run_program

# Each boto3 session the code under test makes (a runtime, a guard invocation) would parse botocore's service
# models again: about a second of JSON per test against the moto server. One loader per data path (the loader
# caches what it parsed) parses each model once per test process; the code under test is unchanged.
botocore.session.create_loader = functools.lru_cache(maxsize=None)(botocore.loaders.create_loader)


@pytest.fixture
def record() -> Callable[..., Preview]:
    """Run a function that declares resources under the recording mocks; returns what was registered."""

    def _record(program: Callable[[], None], config: dict[str, Any] | None = None, stack: str = "test") -> Preview:
        return run_program(program, stack=stack, config={"aws:region": "us-east-1", **(config or {})})

    return _record


@pytest.fixture(scope="session")
def registry_preview() -> Preview:
    return preview("registry")
