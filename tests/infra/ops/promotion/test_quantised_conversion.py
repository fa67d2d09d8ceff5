"""The cuda-fp8/-int8/-int4 conversion program (quantize.py convert) for real, on CPU: a tiny Llama-shaped model
trained here (tiny_llama.py) is written as a sharded safetensors checkpoint, converted as the Job converts it
(the program file run by python3), checked against the compressed-tensors format recorded from its source
(tests/contracts/data/compressed_tensors.json), decoded, compared with quantize.py's own weights, and evaluated
against the reference with evaluate.py. cuda-int4 is built as its recipe builds it: AWQ's scales searched on
calibration data (awq.py, run as the Job runs it) and folded in by the conversion (test_awq.py tests the search
and the folding themselves)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from infra.ops.promotion import evaluate, quality, quantize
from tests.infra.ops.promotion import tiny_llama
from tests.infra.ops.promotion.conversions import (
    AWQ_BUILT,
    JOB_PROGRAMS,
    PROGRAM,
    SCHEMES,
    awq_scales,
    built,
    calibration,
    checkpoint,
    converted,
    programs,
)

CONTRACT = json.loads(
    (Path(__file__).parents[3] / "contracts" / "data" / "compressed_tensors.json").read_text(encoding="utf-8")
)


@pytest.mark.parametrize("variant", SCHEMES)
def test_the_artefact_has_the_recorded_compressed_tensors_config(root, variant):
    out, report = built(root, variant)
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    block = config[CONTRACT["configKey"]]
    expected = CONTRACT["variants"][variant]
    assert block["quant_method"] == CONTRACT["quantMethod"] and block["format"] == expected["format"]
    assert set(block) == set(CONTRACT["quantizationConfigFields"])
    assert block["quantization_status"] in CONTRACT["quantizationStatus"] and block["ignore"] == ["lm_head"]
    (group,) = block["config_groups"].values()
    assert set(group) == set(CONTRACT["schemeFields"]) and group["targets"] == ["Linear"]
    for key in ("weights", "input_activations"):
        if expected[key] is None:
            assert group[key] is None
            continue
        assert set(group[key]) == set(CONTRACT["quantizationArgsFields"])
        assert {k: group[key][k] for k in expected[key]} == expected[key]
    assert group["weights"]["observer"] == "minmax"
    folded = {"awqScales": 18} if variant in AWQ_BUILT else {}  # per layer: 2 norms and 7 linears
    assert (
        report
        == {"scheme": SCHEMES[variant], "layers": 14, "parameters": 2 * (4 * 128 * 128 + 3 * 128 * 256)}
        | {k: report[k] for k in ("bytes", "files")}
        | folded
    )
    # the rest of the checkpoint is carried over as it was
    assert {k: v for k, v in config.items() if k != "quantization_config"} == tiny_llama.config(len(tiny_lm_text()))
    assert (out / "vocabulary.json").read_text(encoding="utf-8") == (checkpoint(root) / "vocabulary.json").read_text(
        encoding="utf-8"
    )


def tiny_lm_text() -> str:
    return tiny_llama.trained()[1].vocabulary


@pytest.mark.parametrize("variant", SCHEMES)
def test_the_tensors_have_the_recorded_names_dtypes_and_shapes(root, variant):
    out, _ = built(root, variant)
    _, tensors = tiny_llama.read_artefact(out)
    layer = "model.layers.1.mlp.down_proj"  # 256 inputs, 128 outputs
    found = {k.removeprefix(layer + "."): v for k, v in tensors.items() if k.startswith(layer + ".")}
    assert set(found) == set(CONTRACT["variants"][variant]["tensors"])
    if variant == "cuda-int4":
        assert found["weight_packed"].dtype == torch.int32 and found["weight_packed"].shape == (128, 256 // 8)
        assert found["weight_scale"].dtype == torch.float16 and found["weight_scale"].shape == (128, 2)
        assert found["weight_shape"].dtype == torch.int64 and found["weight_shape"].tolist() == [128, 256]
    else:
        dtype = torch.float8_e4m3fn if variant == "cuda-fp8" else torch.int8
        assert found["weight"].dtype == dtype and found["weight"].shape == (128, 256)
        assert found["weight_scale"].dtype == torch.float32 and found["weight_scale"].shape == (128, 1)
    # not quantised: embeddings, norms and lm_head stay float32, as in the checkpoint
    for name in ("model.embed_tokens.weight", "lm_head.weight", "model.norm.weight"):
        assert tensors[name].dtype == torch.float32


def test_int4_packing_is_compressed_tensors_order():
    """Eight values per int32 word, the first in the lowest bits, offset by 8 (the recorded pack_to_int32)."""
    values = torch.tensor([[-8, -7, 0, 1, 2, 3, 6, 7]], dtype=torch.int8)
    word = sum((int(v) + 8) << (4 * i) for i, v in enumerate(values[0].tolist()))
    packed = quantize.pack_int4(values)
    assert packed.dtype == torch.int32 and packed.tolist() == [[word - (1 << 32)]]  # 0xFEBA9810 > 2**31: negative
    assert hex(word) == "0xfeba9810"
    assert tiny_llama.unpack_int4(packed, (1, 8)).tolist() == values.tolist()


@pytest.mark.parametrize(
    ("variant", "method", "group"), [("cuda-fp8", "fp8", None), ("cuda-int8", "int8", None), ("cuda-int4", "int4", 128)]
)
def test_the_decoded_weights_are_quantize_pys_own(root, variant, method, group):
    """cuda-int4's of the weight with AWQ's scales folded in (quantize.Folding)."""
    out, _ = built(root, variant)
    found, tensors = tiny_llama.read_artefact(out)
    weights = found["quantization_config"]["config_groups"]["group_0"]["weights"]
    reference, _ = tiny_llama.trained()
    folding = quantize.read_scales(awq_scales(root)[0]) if variant in AWQ_BUILT else quantize.Folding({}, {})
    for name, module in reference.named_modules():
        if not isinstance(module, torch.nn.Linear) or name == "lm_head":
            continue
        w = folding.apply(name + ".weight", module.weight.detach())
        decoded = tiny_llama.dequantised(tensors, name, weights)
        if method == "int4":
            values, scale = quantize.int4_weights(w, 128, scale_dtype=torch.float16)
        else:
            values, scale = (quantize.fp8_weights if method == "fp8" else quantize.int8_weights)(w)
        assert torch.equal(decoded, quantize.dequantise(values, scale, group)), name
        # and close to the weight itself: within half a step (int), or e4m3's relative precision (fp8)
        step = scale.reshape(w.shape[0], -1).repeat_interleave(group or w.shape[1], dim=1)
        bound = step / 2 if method != "fp8" else (w.abs() * 2**-4).clamp(min=step * 2**-9)
        assert bool(((decoded - w).abs() <= bound + 1e-6).all()), name


@functools.cache
def comparison(root: Path, variant: str) -> evaluate.Comparison:
    out, _ = built(root, variant)
    reference, text = tiny_llama.trained()
    held_out = [text.encode("\n" + line) for line in text.held_out]
    return evaluate.compare(reference, tiny_llama.load_artefact(out), held_out, text.tasks())


def test_the_reference_learned_the_corpus():
    reference, text = tiny_llama.trained()
    held_out = [text.encode("\n" + line) for line in text.held_out]
    same = evaluate.compare(reference, reference, held_out, text.tasks())
    assert same.exact_match_reference >= 0.75 and same.perplexity_reference < 16  # of ~35 characters


@pytest.mark.parametrize("variant", SCHEMES)
def test_each_artefact_passes_the_default_gate_when_evaluated(root, variant):
    figures = comparison(root, variant)
    verdict = quality.judge(figures.as_dict(), quality.Budget())
    assert verdict == quality.Verdict(True, ()), figures.as_dict()


def test_the_output_is_sharded_and_indexed_without_holding_the_model(root):
    """A shard limit below one layer's output writes one file per tensor or so, all in the index."""
    out, report = converted(root, "int8", shard_bytes=64 << 10)
    index = json.loads((out / "model.safetensors.index.json").read_text(encoding="utf-8"))
    files = sorted(p.name for p in out.glob("*.safetensors"))
    assert report["files"] == len(files) > 4 and files[0] == f"model-00001-of-{len(files):05d}.safetensors"
    assert set(index["weight_map"].values()) == set(files) and not list(out.glob(".part-*"))
    assert (
        index["metadata"]["total_size"]
        == report["bytes"]
        == sum(v.numel() * v.element_size() for v in tiny_llama.read_artefact(out)[1].values())
    )
    whole, _ = converted(root, "int8")
    assert torch.equal(
        tiny_llama.read_artefact(out)[1]["model.layers.0.mlp.up_proj.weight"],
        tiny_llama.read_artefact(whole)[1]["model.layers.0.mlp.up_proj.weight"],
    )


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(PROGRAM), "convert", *args], capture_output=True, text=True, check=False)


def test_bad_checkpoints_exit_2_with_one_line(tmp_path):
    (tmp_path / "in").mkdir()
    done = run("--scheme", "fp8", "--checkpoint", str(tmp_path / "in"), "--out", str(tmp_path / "out"))
    assert (done.returncode, done.stderr) == (2, f"error: {tmp_path / 'in' / 'config.json'}: no such file\n")
    (tmp_path / "in" / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"]}), encoding="utf-8")
    done = run("--scheme", "fp8", "--checkpoint", str(tmp_path / "in"), "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and done.stderr == (
        f"error: {tmp_path / 'in' / 'config.json'}: architectures ['GPT2LMHeadModel']; the conversion knows "
        "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM\n"
    )
    (tmp_path / "in" / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}), encoding="utf-8")
    done = run("--scheme", "int4", "--checkpoint", str(tmp_path / "in"), "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and done.stderr == (
        f"error: {tmp_path / 'in'}: no *.safetensors (the conversion reads safetensors checkpoints only)\n"
    )


def test_int4_refuses_a_layer_whose_inputs_are_not_whole_groups(tmp_path):
    from safetensors.torch import save_file

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}), encoding="utf-8")
    save_file({"model.layers.0.mlp.down_proj.weight": torch.zeros(8, 96)}, str(tmp_path / "in" / "m.safetensors"))
    done = run("--scheme", "int4", "--checkpoint", str(tmp_path / "in"), "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and done.stderr == (
        "error: model.layers.0.mlp.down_proj.weight: 96 input channels are not a multiple of 128\n"
    )


def test_an_already_quantised_checkpoint_is_refused(root, tmp_path):
    out, _ = converted(root, "fp8")
    done = run("--scheme", "int8", "--checkpoint", str(out), "--out", str(tmp_path / "again"))
    assert done.returncode == 2 and done.stderr.startswith(f"error: {out / 'config.json'}: the checkpoint is already")


@pytest.mark.parametrize("variant", SCHEMES)
def test_the_compressed_tensors_library_reads_and_decompresses_the_artefact(root, variant):
    """compressed-tensors (the test extra's 0.17.0, vLLM 0.33.0's pin): its own config model validates the block,
    and loading through transformers' compressed-tensors quantizer (ModelCompressor.from_compression_config, then
    decompress_model: the library's only reading path since 0.14) decompresses every layer to what the recorded
    decoder reads."""
    pytest.importorskip("compressed_tensors")
    transformers = pytest.importorskip("transformers")
    from compressed_tensors.quantization import QuantizationConfig

    out, _ = built(root, variant)
    config, tensors = tiny_llama.read_artefact(out)
    found = QuantizationConfig.model_validate(config["quantization_config"])
    assert (found.quant_method, found.format, found.ignore) == (
        "compressed-tensors",
        CONTRACT["variants"][variant]["format"],
        ["lm_head"],
    )
    weights = config["quantization_config"]["config_groups"]["group_0"]["weights"]
    layers = sorted({k.rsplit(".", 1)[0] for k in tensors if k.endswith(".weight_scale")})
    loaded = transformers.AutoModelForCausalLM.from_pretrained(
        out, dtype="auto", **evaluate.compressed_load_options(str(out))
    )
    for layer in layers:
        weight = loaded.get_submodule(layer).weight.detach()
        decoded = tiny_llama.dequantised(tensors, layer, weights).to(weight.dtype)
        assert torch.allclose(weight, decoded, rtol=1e-2, atol=1e-3), layer
    assert len(layers) == 14


@pytest.mark.parametrize("scheme", ["fp8", "int8", "int4", "int4-awq"])
def test_transformers_loads_the_artefact_of_a_real_llama_checkpoint(tmp_path, scheme):
    """With the vLLM image's Python stack (transformers, compressed-tensors, accelerate; in the test extra): a
    LlamaForCausalLM written by transformers itself converts, and evaluate.py's loader path
    (AutoModelForCausalLM) loads the artefact with compressed layers whose weights are the recorded decoding's.
    int4-awq: as cuda-int4's recipe builds it, awq.py's scales (bf16 weights, the tiny corpus' tokenizer) folded in."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("compressed_tensors")
    pytest.importorskip("accelerate")
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=64, dtype="bfloat16",
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(tmp_path / "checkpoint", safe_serialization=True)
    tiny_llama.save_tokenizer(tiny_llama.trained()[1], tmp_path / "checkpoint")  # the gate's loader reads it
    scales = []
    if scheme == "int4-awq":
        scheme, scales = "int4", ["--scales", str(tmp_path / "scales.safetensors")]
        work = programs(tmp_path / "program", JOB_PROGRAMS)
        searched = subprocess.run(
            [sys.executable, str(work / "awq.py"), "--checkpoint", str(tmp_path / "checkpoint"), "--calibration",
             str(calibration(tmp_path)), "--out", scales[1]],
            capture_output=True, text=True, check=False, cwd=work,
        )  # fmt: skip
        assert searched.returncode == 0 and json.loads(searched.stdout.splitlines()[-1])["groups"] == 8, searched.stderr
    done = run(
        "--scheme", scheme, "--checkpoint", str(tmp_path / "checkpoint"), "--out", str(tmp_path / "out"), *scales
    )
    assert done.returncode == 0, done.stderr
    loaded = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path / "out", dtype="auto", **evaluate.compressed_load_options(str(tmp_path / "out"))
    )
    found, tensors = tiny_llama.read_artefact(tmp_path / "out")
    weights = found["quantization_config"]["config_groups"]["group_0"]["weights"]
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and name != "lm_head":
            decoded = tiny_llama.dequantised(tensors, name, weights).to(torch.bfloat16)
            dense = loaded.get_submodule(name)  # decompressed at load (transformers 5's default)
            with torch.no_grad():
                eye = torch.eye(dense.in_features, dtype=torch.bfloat16)
                assert torch.allclose(dense(eye).T, decoded, rtol=1e-2, atol=1e-3), name  # x @ W.T with x = I
    ids = torch.randint(0, 64, (1, 16))
    with torch.no_grad():
        assert torch.isfinite(loaded(ids).logits).all()
        forward, _ = evaluate.transformers_loader(str(tmp_path / "out"))  # the quality gate's own loader
        assert torch.equal(forward(ids).logits, loaded(ids).logits)
