"""The load-and-generate program of the promotion Jobs, run for real by the Job's shell step with a stand-in
`vllm` package first on the path (vLLM itself needs an accelerator): what it passes to the engine, what it
refuses, and the report it leaves."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from infra.ops.promotion import jobs
from infra.serving import engine
from infra.serving.spec import ModelSpec

STANDIN = """
import json, os
class _Out:
    def __init__(self, ids): self.token_ids, self.text = ids, "Paris" if ids else ""
class _Request:
    def __init__(self, ids): self.outputs = [_Out(ids)]
class SamplingParams:
    def __init__(self, **kw): self.kw = kw
class LLM:
    def __init__(self, model, **kw):
        with open(os.environ["STANDIN_LOG"], "w") as log:
            json.dump({"model": model, "keywords": kw}, log)
        if os.environ.get("STANDIN_FAIL_LOAD"):
            raise OSError("compiled model not found")
    def generate(self, prompts, params):
        n = int(os.environ.get("STANDIN_TOKENS", "3"))
        return [_Request(list(range(n))) for _ in prompts]
"""

MODEL = ModelSpec.model_validate(
    {"name": "m", "version": "1", "accelerator": "inf2", "image": "neuron:1", "maxNumSeqs": 4}
)


def run(tmp_path, **env):
    (tmp_path / "vllm").mkdir(exist_ok=True)
    (tmp_path / "vllm" / "__init__.py").write_text(STANDIN, encoding="utf-8")
    keywords = json.dumps(engine.engine_settings(MODEL).keywords())
    log, report = tmp_path / "log.json", tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-c", jobs.ENGINE_CHECK, "/served", keywords, str(report)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path), "STANDIN_LOG": str(log), **env},
        timeout=60,
    )
    return done, (json.loads(log.read_text(encoding="utf-8")) if log.exists() else None), report


def test_the_engine_gets_exactly_the_servers_settings_and_the_report_is_written(tmp_path):
    done, seen, report = run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert seen == {"model": "/served", "keywords": engine.engine_settings(MODEL).keywords()}
    written = json.loads(report.read_text(encoding="utf-8"))
    assert written["generatedTokens"] == [3, 3] and written["sample"] == "Paris"
    assert "engine check passed: 6 tokens" in done.stdout


def test_an_artefact_that_generates_nothing_fails_the_check(tmp_path):
    done, _, report = run(tmp_path, STANDIN_TOKENS="0")
    assert done.returncode == 1 and "engine check failed: generated [0, 0] tokens" in done.stderr
    assert json.loads(report.read_text(encoding="utf-8"))["generatedTokens"] == [
        0,
        0,
    ]  # the figures stay for the Job's log


def test_an_artefact_that_does_not_load_fails_the_check(tmp_path):
    done, _, _ = run(tmp_path, STANDIN_FAIL_LOAD="1")
    assert done.returncode == 1 and "compiled model not found" in done.stderr


@pytest.mark.parametrize("argv", [[], ["/served"], ["/served", "{}", "r.json", "extra"]])
def test_wrong_arguments_are_a_usage_error(argv):
    done = subprocess.run([sys.executable, "-c", jobs.ENGINE_CHECK, *argv], capture_output=True, text=True)
    assert done.returncode == 2 and "usage: engine_check" in done.stderr
