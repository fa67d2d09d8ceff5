"""neuron-int8 against what NxD Inference does (read at 0.5.9230 and found unchanged through 0.9.0; the pinned Neuron
image installs 0.10.18399, whose source is not public), recorded from its sources in data/nxd_inference.json: the
NeuronConfig keys the server and the conversion set, that the quantized checkpoint is written before the compile
(by the conversion's own step, explicitly, though the vllm-neuron plugin now writes it too when it compiles), and
that the tests' writer of its format (nxd_format.py, quantize.py's int8 quantiser)
writes what torch's per-channel quantisation, which NxD Inference's quantiser calls, writes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from infra.ops.promotion import evaluate, jobs, neuron_quantize
from infra.ops.promotion.recipes import RECIPES
from infra.serving import engine
from infra.serving.spec import ModelSpec
from infra.serving.variants import VARIANTS
from tests.contracts.test_image_contracts import IMAGES
from tests.infra.ops.promotion import nxd_format

FACTS = json.loads((Path(__file__).parent / "data" / "nxd_inference.json").read_text(encoding="utf-8"))
SERVER = ModelSpec.model_validate(
    {
        "name": "m",
        "version": "1",
        "accelerator": "inf2",
        "image": RECIPES["neuron-int8"].default_image,
        "variant": "neuron-int8",
    }
)


def test_the_facts_name_their_sources_and_the_images_versions():
    for source in FACTS["sources"].values():
        assert source["repository"].startswith("https://github.com/") and re.fullmatch(
            r"[0-9a-f]{40}", source["commit"]
        )
    read = IMAGES[RECIPES["neuron-int8"].default_image]["source"]["read"]
    assert "neuronx_distributed_inference 0.10.18399" in read and "neuronx_distributed 0.19.28492" in read
    assert "neuronx_distributed_inference 0.10.18399" in FACTS["about"] and "0.9.0" in FACTS["about"]
    assert FACTS["sources"]["neuronxDistributedInference"]["tag"] == "v0.5.9230"


def test_the_server_sets_every_key_neuron_config_needs_for_a_quantized_model():
    overrides = engine.neuron_config(engine.engine_settings(SERVER).keywords()) or {}
    config = FACTS["neuronConfig"]
    quantization = {k: v for k, v in overrides.items() if k in config["keys"]}
    assert set(quantization) == set(config["keys"])  # quantized_checkpoints_path too: asserted with `quantized`
    assert quantization["quantized"] is True
    assert quantization["quantization_type"] in config["quantizationTypes"]
    assert quantization["quantization_type"] != config["defaults"]["quantization_type"]  # per channel, named
    assert quantization["quantization_dtype"] in config["quantizationDtypes"]
    assert quantization["modules_to_not_convert"] == ["lm_head"]
    assert quantization["quantized_checkpoints_path"] == f"{engine.MODEL_DIR}/{engine.NEURON_QUANTIZED_DIR}"
    assert set(VARIANTS["neuron-int8"].neuron_quantization or {}) | {"quantized_checkpoints_path"} == set(
        config["keys"]
    )
    assert neuron_quantize.QUANTIZATION_KEYS == tuple(config["keys"])


def test_the_checkpoint_is_written_by_nxd_inference_before_the_compile_reads_it():
    writer = FACTS["writer"]
    # The plugin writes it too when it compiles a quantized model; the conversion writes it first, as a step of its
    # own, so the artefact's checkpoint is checked (safetensors) whatever the plugin release does.
    assert writer["calledByVllmNeuron"] is True and writer["generatesWhenMissing"] is False
    assert writer["device"] == "cpu"
    script = jobs.convert_script(RECIPES["neuron-int8"])
    quantize_at = script.index('python3 /work/neuron_quantize.py /work/checkpoint "$ENGINE"')
    compile_at = script.index("NEURON_COMPILED_ARTIFACTS=/work/out/neuron-compiled python3 /work/engine_check.py")
    assert quantize_at < compile_at
    assert "save_quantized_state_dict(checkpoint, config)" in jobs.PROGRAMS["neuron_quantize.py"]
    assert writer["call"].endswith(".save_quantized_state_dict(model_path, config)")
    # A directory: safetensors (else a single torch.save file, which evaluate.py does not read).
    assert "os.makedirs(path, exist_ok=True)" in jobs.PROGRAMS["neuron_quantize.py"]
    assert "a directory path: safetensors" in writer["save"]


def test_the_evaluations_names_are_those_the_served_model_classes_write():
    """neuron_quantize.py takes the class from NxD Inference's own table, as the plugin does; for the Llama class, the
    quantized state is the Hugging Face model's `.model` (names without `model.`) plus `lm_head.*`, which is what
    evaluate.load_nxd_int8 maps back and nxd_format.py writes."""
    classes = set(FACTS["vllmNeuron"]["modelClasses"].values())
    assert classes == {"neuronx_distributed_inference.models.llama.modeling_llama.NeuronLlamaForCausalLM"}
    assert 'MODEL_TYPES[architecture]["causal-lm"]' in jobs.PROGRAMS["neuron_quantize.py"]
    assert "hf_model.model.state_dict() (names without 'model.') plus lm_head.*" in FACTS["writer"]["stateDict"]
    assert nxd_format.nxd_name("model.layers.3.mlp.up_proj.weight") == "layers.3.mlp.up_proj.weight"
    assert nxd_format.nxd_name("lm_head.weight") == "lm_head.weight"


def test_the_tests_writer_is_torchs_per_channel_int8_quantisation():
    """NxD Inference's per_channel_symmetric: quantize_dynamic with PerChannelAbsMaxObserver (scale = max|w| / 127
    per output row) and torch.quantize_per_channel; int_repr and the scale as float32 [out, 1] are written. The
    observer keeps a scale at least float32 eps, quantize.py at least 1e-8 / 127: only rows whose largest weight is
    below 127 eps (1.5e-5) get another scale (zero rows: the same zero values)."""
    torch.manual_seed(0)
    w = torch.randn(48, 32) * torch.linspace(0.01, 3, 48).unsqueeze(1)
    w[5] = 0.0  # a zero row: the observer's eps keeps its scale positive
    tensors = nxd_format.quantized_state({"model.layers.0.mlp.up_proj.weight": w, "lm_head.weight": w})
    scale = torch.clamp(w.abs().amax(dim=1) / 127, min=torch.finfo(torch.float32).eps)
    q = torch.quantize_per_channel(w, scale.double(), torch.zeros(48, dtype=torch.int64), 0, torch.qint8)
    formats = FACTS["format"]["quantised"]
    values, written = tensors["layers.0.mlp.up_proj.weight"], tensors["layers.0.mlp.up_proj.scale"]
    assert str(values.dtype) == f"torch.{formats['weight']['dtype']}" and values.shape == w.shape
    assert str(written.dtype) == f"torch.{formats['scale']['dtype']}" and written.shape == (48, 1)
    nonzero = w.abs().amax(dim=1) > 0
    # The same integers, but where w / scale lies within float rounding of a half (torch divides in float64, the
    # writer in float32): there the two may round to neighbours.
    ratio = (w / scale.unsqueeze(1)).abs()
    at_a_half = (ratio - ratio.floor() - 0.5).abs() < 1e-4
    differ = values != q.int_repr()
    assert not (differ & ~at_a_half).any() and (values.int() - q.int_repr().int()).abs().max() <= 1
    assert torch.allclose(written[nonzero, 0], q.q_per_channel_scales().float()[nonzero], rtol=1e-7, atol=0)
    # Names without `model.`; lm_head (modules_to_not_convert) as it is, in the unquantised dtype.
    assert set(tensors) == {"layers.0.mlp.up_proj.weight", "layers.0.mlp.up_proj.scale", "lm_head.weight"}
    assert tensors["lm_head.weight"].dtype == getattr(torch, FACTS["format"]["unquantisedDtype"])


def test_the_evaluation_reads_the_files_nxd_inference_writes():
    assert FACTS["format"]["files"] == ["model.safetensors", "model.safetensors.index.json"]
    assert evaluate.NXD_QUANTIZED == engine.NEURON_QUANTIZED_DIR
    source = Path(evaluate.__file__).read_text(encoding="utf-8")
    for name in FACTS["format"]["files"]:
        assert f'"{name}"' in source


@pytest.mark.parametrize(
    "argv",
    [["x"], ["x", "/c", "{}"], ["x", "/c", '{"additional_config": {"override_neuron_config": {"quantized": true}}}']],
)
def test_the_program_refuses_an_engine_without_a_quantized_checkpoint(argv, capsys):
    code = neuron_quantize.main(argv)
    assert code == 2
    err = capsys.readouterr().err
    assert err in (
        "usage: neuron_quantize <checkpoint dir> <engine keywords JSON>\n",
        "error: the engine's override_neuron_config sets no quantized checkpoint\n",
    )
