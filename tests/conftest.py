"""Fixtures shared by every test: the recording mocks (the offline engine's own runtime) for component
tests, and the registry stack's preview; one preview of each stack and config per test process. Plain helpers
live in tests/helpers.py."""

from __future__ import annotations

import copy
import functools
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import botocore.loaders
import botocore.session
import hypothesis
import hypothesis.configuration
import pytest

from infra.tools.offline import engine
from infra.tools.offline.engine import Preview, preview, run_program

# The suite runs against the emulators it starts on the loopback, never a developer's or a CI runner's own clouds:
# whatever credentials, profiles, default regions and projects this machine holds (in the environment, in ~/.aws,
# in gcloud's configuration, or at a cloud's metadata server) stay out of it, and so does any proxy, which would
# take the emulators' loopback requests.
for _name in (
    "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
    "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
    "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT",
    "PULUMI_CONFIG", "PULUMI_CONFIG_SECRET_KEYS", "PULUMI_STACK", "PULUMI_PROJECT",
):  # fmt: skip
    os.environ.pop(_name, None)
_nowhere = str(Path(__file__).resolve().parent / "data" / "no-such-cloud-config")
os.environ.update(
    AWS_CONFIG_FILE=_nowhere, AWS_SHARED_CREDENTIALS_FILE=_nowhere, AWS_EC2_METADATA_DISABLED="true",
    CLOUDSDK_CONFIG=_nowhere, NO_GCE_CHECK="True",
)  # fmt: skip
for _name in ("NO_PROXY", "no_proxy"):
    os.environ[_name] = ",".join(filter(None, [os.environ.get(_name, ""), "localhost,127.0.0.1,::1"]))

# Property tests judge the same examples on every machine and leave nothing behind: no deadline (a slower CPU or a
# busy xdist worker is not a failure), the examples drawn from a fixed seed, and no example database (a
# `.hypothesis/` in the current directory would replay what an earlier run found, so one clone's run would differ
# from another's). MLINFRA_HYPOTHESIS_EXPLORE=1 draws new examples each run, for hunting, with the same other settings.
# Hypothesis still caches the constants it reads from our sources (keyed by their content): in the clone's ignored
# `.hypothesis/`, whatever the current directory.
hypothesis.configuration.set_hypothesis_home_dir(str(Path(__file__).resolve().parents[1] / ".hypothesis"))
hypothesis.settings.register_profile("mlinfra", deadline=None, derandomize=True, database=None, print_blob=True)
hypothesis.settings.register_profile("explore", parent=hypothesis.settings.get_profile("mlinfra"), derandomize=False)
hypothesis.settings.load_profile("explore" if os.environ.get("MLINFRA_HYPOTHESIS_EXPLORE") == "1" else "mlinfra")

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
        tuple(sorted((k, v) for k, v in os.environ.items() if not k.startswith("PYTEST_"))),  # pytest's own, per test
    )
    if key not in _previews:
        _previews[key] = _engine_run(project, stack, config, chain)
    return copy.deepcopy(_previews[key])


engine._run = _remembered_run


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
