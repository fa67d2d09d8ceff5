"""neuron_quantize.py, the program the neuron-int8 conversion Job ships, run alone as the Job runs it. NxD
Inference exists only in the Neuron image, so they are stood in for by modules that behave as
their recorded sources do (tests/contracts/data/nxd_inference.json: NeuronConfig asserts the path with
`quantized`; save_quantized_state_dict writes safetensors into a directory, one torch.save file elsewhere) and
record what the program hands them. Only a real inf2 node runs the real ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from infra.ops.promotion import jobs
from infra.ops.promotion.recipes import RECIPES
from infra.ops.promotion.sizing import Resources
from infra.serving.spec import ModelSpec
from tests.infra.ops.promotion import tiny_llama

# NxD Inference's model table (neuronx_distributed_inference/utils/constants.py, read at 0.8 and 0.9.0): model_type
# -> task -> model class.
NXDI_CONSTANTS = """
from neuronx_distributed_inference.models.llama.modeling_llama import NeuronLlamaForCausalLM
MODEL_TYPES = {"llama": {"causal-lm": NeuronLlamaForCausalLM}}
"""
NXDI_ADAPTER = """
import json, os


def load_pretrained_config(path):
    with open(os.path.join(path, "config.json")) as handle:
        return json.load(handle)
"""
NXDI_LLAMA = """
import json, os


class NeuronConfig:
    def __init__(self, **kwargs):
        self.kwargs = kwargs
        if kwargs.get("quantized"):
            assert kwargs.get("quantized_checkpoints_path") is not None, "quantized_checkpoints_path is required"


class InferenceConfig:
    def __init__(self, neuron_config, load_config):
        self.neuron_config, self.loaded = neuron_config, load_config


class NeuronLlamaForCausalLM:
    @classmethod
    def get_neuron_config_cls(cls):
        return NeuronConfig

    @classmethod
    def get_config_cls(cls):
        return InferenceConfig

    @classmethod
    def save_quantized_state_dict(cls, model_path, config):
        path = config.neuron_config.kwargs["quantized_checkpoints_path"]
        record = {"model_path": model_path, "neuron_config": config.neuron_config.kwargs,
                  "architectures": config.loaded["architectures"], "was_dir": os.path.isdir(path)}
        with open(os.environ["RECORD"], "w") as handle:
            json.dump(record, handle)
        if os.environ.get("WRITE") == "none":
            return
        if os.path.isdir(path):
            open(os.path.join(path, "model.safetensors"), "wb").close()
        else:
            open(path, "wb").close()
"""


def standins(root: Path) -> Path:
    files = {
        "neuronx_distributed_inference/utils/constants.py": NXDI_CONSTANTS,
        "neuronx_distributed_inference/utils/hf_adapter.py": NXDI_ADAPTER,
        "neuronx_distributed_inference/models/llama/modeling_llama.py": NXDI_LLAMA,
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        for parent in path.relative_to(root).parents:
            if str(parent) != ".":
                (root / parent / "__init__.py").touch()
    return root


def run(tmp_path: Path, engine: dict, write: str = "safetensors") -> tuple[subprocess.CompletedProcess[str], dict]:
    program = tmp_path / "work" / "neuron_quantize.py"
    program.parent.mkdir(exist_ok=True)
    program.write_text(jobs.PROGRAMS["neuron_quantize.py"], encoding="utf-8")  # as the Job writes it
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir(exist_ok=True)
    (checkpoint / "config.json").write_text(json.dumps(tiny_llama.config(40)), encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": str(standins(tmp_path / "site")),
        "RECORD": str(tmp_path / "record.json"),
        "WRITE": write,
    }
    done = subprocess.run(
        [sys.executable, str(program), str(checkpoint), json.dumps(engine)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    record = (
        json.loads((tmp_path / "record.json").read_text(encoding="utf-8"))
        if (tmp_path / "record.json").exists()
        else {}
    )
    return done, record


def convert_engine(tmp_path: Path) -> dict:
    """The conversion step's $ENGINE, with the artefact directory moved under tmp_path."""
    pod = jobs.conversion_job(
        bucket="b", bucket_arn="arn:aws:s3:::b", key_arn="arn:aws:kms:us-east-1:123456789012:key/k",
        role_arn="arn:aws:iam::123456789012:role/r", region="us-east-1", ns="models", checkpoint="checkpoints/r/s/",
        model="m", version="1", variant="neuron-int8", run_id="r", resources=Resources(1, 1, 1, 1),
        server=ModelSpec.model_validate({"name": "m", "version": "1", "accelerator": "inf2",
                                              "image": RECIPES["neuron-int8"].default_image, "variant": "neuron-int8"}),
    )["spec"]["template"]["spec"]  # fmt: skip
    [convert] = [c for c in pod["initContainers"] if c["name"] == "convert"]
    text = next(e["value"] for e in convert["env"] if e["name"] == "ENGINE")
    return json.loads(text.replace("/work/out/", f"{tmp_path}/out/"))


def test_it_hands_nxd_inference_the_servers_quantisation_and_a_directory(tmp_path):
    engine = convert_engine(tmp_path)
    done, record = run(tmp_path, engine)
    assert done.returncode == 0, done.stderr
    path = f"{tmp_path}/out/neuron-quantized"
    assert record == {
        "model_path": str(tmp_path / "checkpoint"),
        "neuron_config": {
            "tp_degree": 2,
            "quantized": True,
            "quantized_checkpoints_path": path,
            "quantization_type": "per_channel_symmetric",
            "quantization_dtype": "int8",
            "modules_to_not_convert": ["lm_head"],
        },
        "architectures": ["LlamaForCausalLM"],
        "was_dir": True,  # made before the call: NxD Inference writes safetensors into a directory
    }
    assert json.loads(done.stdout.splitlines()[-1]) == {
        "architecture": "llama",
        "model": "neuronx_distributed_inference.models.llama.modeling_llama.NeuronLlamaForCausalLM",
        "path": path,
        "files": ["model.safetensors"],
    }


def test_nothing_written_fails_the_step(tmp_path):
    done, _ = run(tmp_path, convert_engine(tmp_path), write="none")
    assert done.returncode == 1
    assert (
        done.stderr.splitlines()[-1]
        == f"error: NxD Inference wrote no safetensors to {tmp_path}/out/neuron-quantized ([])"
    )


def test_an_engine_without_quantisation_exits_2_before_importing_anything(tmp_path):
    done, record = run(
        tmp_path,
        {"tensor_parallel_size": 2, "additional_config": {"override_neuron_config": {"save_sharded_checkpoint": True}}},
    )
    assert done.returncode == 2 and record == {}
    assert done.stderr == "error: the engine's override_neuron_config sets no quantized checkpoint\n"


def test_an_architecture_nxd_inference_has_no_model_for_exits_2(tmp_path):
    engine = convert_engine(tmp_path)
    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "checkpoint" / "config.json").write_text('{"model_type": "mamba"}', encoding="utf-8")
    program = tmp_path / "work" / "neuron_quantize.py"
    program.parent.mkdir()
    program.write_text(jobs.PROGRAMS["neuron_quantize.py"], encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(program), str(tmp_path / "checkpoint"), json.dumps(engine)],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(standins(tmp_path / "site"))},
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == "error: NxD Inference has no causal-LM model for model_type 'mamba'"
