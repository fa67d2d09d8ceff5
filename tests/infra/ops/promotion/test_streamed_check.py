"""The load check of a variant whose server streams it from S3, run for real against the moto server: the Job's
credentials sidecar (a stand-in `aws` for STS) writes the down-scoped session, the `check` step's shell runs as the
manifest gives it (its environment, its command; paths under /aws and /work moved to a temporary directory), and
the Run:ai Model Streamer, the library vLLM's runai_streamer load format reads S3 with, reads the published artefact
through the step's CLI config alone. vLLM itself needs an accelerator, so a stand-in `vllm` package does what vLLM
0.33.0 does with an s3:// model and that load format (the facts below) and counts the tensors it streamed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from infra.ops.promotion import jobs
from tests.infra.ops.promotion.test_credentials_sidecar import STAND_IN, script, wait_for
from tests.infra.ops.promotion.test_jobs import conversion

# vLLM 0.33.0 (its sdist, read 2026-12-03): ModelConfig.maybe_pull_model_tokenizer_for_runai (vllm/config/model.py)
# pulls an object-storage model's "*.model", "*.py" and "*.json" files with runai_model_streamer's pull_files into a
# temporary directory; RunaiModelStreamerLoader (vllm/model_executor/model_loader/
# runai_streamer_loader.py) lists its weights with list_safetensors, and runai_safetensors_weights_iterator
# (weight_utils.py) streams them with SafetensorsStreamer.stream_files / get_tensors.
STANDIN_VLLM = """
import json, os, tempfile
from runai_model_streamer import SafetensorsStreamer, list_safetensors, pull_files
class _Out:
    def __init__(self, ids): self.token_ids, self.text = ids, "ok"
class _Request:
    def __init__(self, ids): self.outputs = [_Out(ids)]
class SamplingParams:
    def __init__(self, **kw): pass
class LLM:
    def __init__(self, model, **kw):
        assert kw.get("load_format") == "runai_streamer" and model.startswith("s3://"), (model, kw)
        pulled = tempfile.mkdtemp()
        pull_files(model, pulled, allow_pattern=["*.model", "*.py", "*.json"])
        tensors = {}
        with SafetensorsStreamer() as streamer:
            streamer.stream_files(list_safetensors(model))
            for name, tensor in streamer.get_tensors():
                tensors[name] = tensor.sum().item()
        self.tensors = len(tensors)
        with open(os.environ["STANDIN_LOG"], "w") as log:
            json.dump({"model": model, "pulled": sorted(os.listdir(pulled)), "tensors": tensors}, log)
    def generate(self, prompts, params):
        return [_Request(list(range(self.tensors))) for _ in prompts]
"""
VARIANT = "cuda"


def steps() -> dict[str, dict]:
    pod = conversion(VARIANT)["spec"]["template"]["spec"]
    return {c["name"]: c for c in pod["initContainers"] + pod["containers"]}


def moved(text: str, tmp: Path) -> str:
    return text.replace("/aws/", f"{tmp}/aws/").replace("/work/", f"{tmp}/work/")


@pytest.fixture
def published(aws, tmp_path: Path) -> str:
    """The artefact in /work/out, and in the registry where `publish` copies it; the check's source URI."""
    check = steps()["check"]["command"][-1]
    source = next(word for word in check.split() if word.startswith("s3://"))
    bucket, _, prefix = source.removeprefix("s3://").partition("/")
    out = tmp_path / "work" / "out"
    out.mkdir(parents=True)
    save_file({"w": torch.arange(12, dtype=torch.float32).reshape(3, 4), "b": torch.ones(4)}, out / "model.safetensors")
    (out / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}', encoding="utf-8")
    (out / "tokenizer.json").write_text("{}", encoding="utf-8")
    aws.s3.create_bucket(Bucket=bucket)
    for path in out.iterdir():
        aws.s3.upload_file(str(path), bucket, prefix + path.name)
    (tmp_path / "work" / "engine_check.py").write_text(jobs.ENGINE_CHECK, encoding="utf-8")
    (tmp_path / "standin" / "vllm").mkdir(parents=True)
    (tmp_path / "standin" / "vllm" / "__init__.py").write_text(STANDIN_VLLM, encoding="utf-8")
    return source


def run_check(tmp_path: Path, moto_url: str) -> subprocess.CompletedProcess[str]:
    check = steps()["check"]
    env = {e["name"]: moved(e["value"], tmp_path) for e in check["env"] if "value" in e}
    env |= {
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",  # python3: this environment's, with the streamer
        "PYTHONPATH": str(tmp_path / "standin"),
        "STANDIN_LOG": str(tmp_path / "standin.json"),
        "HOME": str(tmp_path),
        # the emulator's endpoint, path-style as an S3-compatible store needs it (vLLM's runai streamer docs)
        "AWS_ENDPOINT_URL": moto_url,
        "RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING": "0",
        "AWS_EC2_METADATA_DISABLED": "true",
        # what Pod Identity would inject, had the annotation failed: the step unsets it
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:9/never",
    }
    return subprocess.run(
        ["sh", "-c", moved(check["command"][-1], tmp_path)], env=env, capture_output=True, text=True, timeout=180
    )


@pytest.fixture
def sidecar(tmp_path: Path):
    """The credentials sidecar, running: the down-scoped session and the steps' CLI config in tmp/aws."""
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    for d in (bin_dir, state, tmp_path / "aws"):
        d.mkdir()
    (bin_dir / "aws").write_text(STAND_IN, encoding="utf-8")
    (bin_dir / "aws").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(state / "calls"), "STATE": str(state)}
    process = subprocess.Popen(["sh", "-c", script(steps()["credentials"], tmp_path / "aws")], env=env)
    try:
        wait_for(lambda: (tmp_path / "aws" / "ready").exists())
        yield tmp_path / "aws"
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=5)


def test_the_check_streams_the_published_artefact_with_the_down_scoped_session(published, sidecar, tmp_path, moto_url):
    done = run_check(tmp_path, moto_url)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads((tmp_path / "standin.json").read_text(encoding="utf-8"))
    assert seen["model"] == published
    assert seen["pulled"] == ["config.json", "tokenizer.json"]  # config and tokenizer files, no weights
    assert seen["tensors"] == {"w": 66.0, "b": 4.0}  # every tensor, read back from the registry
    report = json.loads((tmp_path / "work" / "conversion.json").read_text(encoding="utf-8"))
    assert report["check"]["generatedTokens"] == [2, 2]
    assert {f["path"] for f in report["files"]} == {"model.safetensors", "config.json", "tokenizer.json"}


def test_without_the_sidecars_session_the_streamer_reads_nothing(published, sidecar, tmp_path, moto_url):
    (sidecar / "session.json").unlink()  # no other credentials reach the step: not the pod's, not the environment's
    done = run_check(tmp_path, moto_url)
    assert done.returncode != 0 and not (tmp_path / "standin.json").exists()
    assert "Error when retrieving credentials from custom-process" in done.stderr


def test_a_sidecar_that_could_not_assume_fails_the_check_at_once(published, sidecar, tmp_path, moto_url):
    (sidecar / "failed").write_text("cannot assume the converter role\n", encoding="utf-8")
    done = run_check(tmp_path, moto_url)
    assert done.returncode == 1 and done.stderr == "cannot assume the converter role\n"
    assert not (tmp_path / "standin.json").exists()
