"""Fixtures shared by every test: the recording mocks (the offline engine's own runtime) for component
tests, and the registry stack's preview; one preview of each stack and config per test process. Plain helpers
live in tests/helpers.py."""

from __future__ import annotations

import copy
import functools
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import botocore.loaders
import botocore.session
import pytest

from infra.tools.offline import engine
from infra.tools.offline.engine import Preview, preview, run_program

# Each boto3 session the code under test makes (a runtime, a guard invocation) would parse botocore's service
# models again: about a second of JSON per test against the moto server. One loader per data path (the loader
# caches what it parsed) parses each model once per test process; the code under test is unchanged.
botocore.session.create_loader = functools.lru_cache(maxsize=None)(botocore.loaders.create_loader)

# A stack previewed with the same config gives the same preview: the suite asked for about 175 previews, half of them
# repeats (the CLI verbs' tests, the corpus, the diagram and report each preview the demo stacks again), at 0.1 to
# 1.5 s each. The offline engine's run is remembered per process by what decides it (the project, the stack, its
# whole config, the environment) and each caller gets its own deep copy, so nothing a test does to a preview reaches
# another. A test that has monkeypatched anything (or a program run under the mocks) always runs the engine.
_previews: dict[tuple[Any, ...], Preview] = {}
_running: list[pytest.FixtureRequest | None] = [None]
_engine_run = engine._run


def _patched() -> bool:
    request = _running[0]
    if request is None or "monkeypatch" not in request.fixturenames:
        return False
    patch = request.getfixturevalue("monkeypatch")
    return bool(patch._setattr or patch._setitem or patch._cwd or patch._savesyspath is not None)


def _remembered_run(project: Any, stack: str, config: dict[str, Any], chain: tuple[str, ...], program: Any = None):
    if program is not None or _patched():
        return _engine_run(project, stack, config, chain, program)
    key = (
        str(project.root),
        str(project.config_dir),
        stack,
        json.dumps(config, sort_keys=True, default=repr),
        chain,
        tuple(sorted(os.environ.items())),
    )
    if key not in _previews:
        _previews[key] = _engine_run(project, stack, config, chain)
    return copy.deepcopy(_previews[key])


engine._run = _remembered_run


@pytest.fixture(scope="session", autouse=True)
def _shared_directory(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Under pytest-xdist, a directory every worker of this run sees (beside their own temporary directories),
    for what one worker computes and the others reuse (tests/infra/ops/promotion/tiny_lm.py's trained models)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = tmp_path_factory.getbasetemp().parent / "shared"
        shared.mkdir(exist_ok=True)
        os.environ["MLINFRA_TESTS_SHARED_DIR"] = str(shared)


@pytest.fixture(autouse=True)
def _running_test(request: pytest.FixtureRequest) -> Iterator[None]:
    _running[0] = request
    yield
    _running[0] = None


@pytest.fixture
def record() -> Callable[..., Preview]:
    """Run a function that declares resources under the recording mocks; returns what was registered."""

    def _record(program: Callable[[], None], config: dict[str, Any] | None = None, stack: str = "test") -> Preview:
        return run_program(program, stack=stack, config={"aws:region": "us-east-1", **(config or {})})

    return _record


@pytest.fixture(scope="session")
def registry_preview() -> Preview:
    return preview("registry")
