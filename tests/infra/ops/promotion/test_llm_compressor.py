"""llm-compressor builds the quantised CUDA variants for real, on the CPU, from the tiny Llama checkpoint:
compress.py run by the converter environment's python (images/converter/requirements.txt, built by `make test`),
its output read with the vLLM image's own compressed-tensors and transformers (the test extra's), decoded,
and gated by evaluate.py and the quality gate as a promotion gates it."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from infra.ops.promotion import compress, evaluate, quality
from tests.helpers import ROOT
from tests.infra.ops.promotion import tiny_llama
from tests.infra.ops.promotion.conversions import ONE_THREAD, calibration, checkpoint, kernel_env

CONVERTER = ROOT / ".venv-converter" / "bin" / "python"
CONTRACT = json.loads((ROOT / "tests" / "contracts" / "data" / "compressed_tensors.json").read_text(encoding="utf-8"))
SCHEMES = {"cuda-fp8": "fp8", "cuda-int8": "int8", "cuda-int4": "int4"}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    assert CONVERTER.exists(), f"{CONVERTER}: the converter environment is missing; `make test` builds it"
    return subprocess.run(
        [str(CONVERTER), compress.__file__, *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **ONE_THREAD, "PYTHONPATH": ""},
    )


@functools.cache
def compressed(root: Path, scheme: str) -> tuple[Path, dict[str, object]]:
    out = root / f"llmc-{scheme}"
    done = run("--scheme", scheme, "--checkpoint", str(checkpoint(root)), "--calibration", str(calibration(root)),
               "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return out, json.loads(done.stdout.strip().splitlines()[-1])


def eval_data(root: Path) -> Path:
    """The tiny corpus' held-out prose and facts as datasets/evals/<name>/ holds them (written once per root)."""
    data = root / "evals"
    return data if data.exists() else tiny_llama.trained()[1].write_evaluation(data)


def gated(root: Path, variant: Path, name: str) -> tuple[dict[str, object], quality.Verdict]:
    out = root / f"quality-{name}.json"
    argv = ["--reference", str(checkpoint(root)), "--variant", str(variant), "--data", str(eval_data(root))]
    assert evaluate.main([*argv, "--out", str(out)]) == 0
    figures = json.loads(out.read_text(encoding="utf-8"))
    return figures, quality.judge(figures, quality.Budget())


@pytest.mark.parametrize("variant", sorted(SCHEMES))
def test_llm_compressor_writes_the_compressed_tensors_format_vllm_reads(root, variant):
    from compressed_tensors.quantization import QuantizationConfig

    out, report = compressed(root, SCHEMES[variant])
    assert report["library"] == "llmcompressor 0.14.0.1" and report["samples"] == (0 if variant == "cuda-fp8" else 44)
    config, tensors = tiny_llama.read_artefact(out)
    block = QuantizationConfig.model_validate(config["quantization_config"])  # vLLM 0.33.0's compressed-tensors
    expected = CONTRACT["variants"][variant]
    assert (block.quant_method, block.format, block.ignore) == ("compressed-tensors", expected["format"], ["lm_head"])
    (group,) = block.config_groups.values()
    for key in ("weights", "input_activations"):
        found = getattr(group, key)
        if expected[key] is None:
            assert found is None
            continue
        assert {k: getattr(found, k) for k in expected[key]} == expected[key], key
    layers = sorted({k.rsplit(".", 1)[0] for k in tensors if k.endswith(".weight_scale")})
    assert len(layers) == 14 and not any(k.startswith("lm_head.weight_") for k in tensors)


@pytest.mark.parametrize("variant", sorted(SCHEMES))
def test_transformers_decompresses_it_to_the_recorded_decoding(root, variant):
    import transformers

    out, _ = compressed(root, SCHEMES[variant])
    config, tensors = tiny_llama.read_artefact(out)
    weights = config["quantization_config"]["config_groups"]["group_0"]["weights"]
    loaded = transformers.AutoModelForCausalLM.from_pretrained(
        out, dtype="auto", **evaluate.compressed_load_options(str(out))
    )
    for layer in sorted({k.rsplit(".", 1)[0] for k in tensors if k.endswith(".weight_scale")}):
        weight = loaded.get_submodule(layer).weight.detach()
        decoded = tiny_llama.dequantised(tensors, layer, weights).to(weight.dtype)
        assert torch.allclose(weight, decoded, rtol=1e-2, atol=1e-3), layer


@pytest.mark.parametrize("variant", sorted(SCHEMES))
def test_the_gate_passes_llm_compressors_variants_within_the_default_budget(root, variant):
    out, _ = compressed(root, SCHEMES[variant])
    figures, verdict = gated(root, out, variant)
    assert verdict.passed, verdict.reasons
    assert figures["perplexity"]["tokens"] == 450 and figures["exactMatch"]["tasks"] == 24


def broken_copy(artefact: Path, into: Path, factor: float = 0.2) -> Path:
    """`artefact` copied to `into` with every weight scale times `factor` (a fifth: the weights clip)."""
    into.mkdir()
    for item in artefact.iterdir():
        if item.suffix == ".safetensors":
            tensors = load_file(str(item))
            scaled = {k: v * factor if k.endswith(".weight_scale") else v for k, v in tensors.items()}
            save_file(scaled, str(into / item.name))
        elif item.is_file():
            (into / item.name).write_bytes(item.read_bytes())
    return into


def test_a_broken_scale_in_its_artefact_fails_the_gate(root, tmp_path):
    """Its int4 artefact with every weight group's scale at a fifth: the weights clip, and the gate refuses it."""
    broken = broken_copy(compressed(root, "int4")[0], tmp_path / "broken")
    _, verdict = gated(root, broken, "broken")
    assert not verdict.passed and any("held-out perplexity" in reason for reason in verdict.reasons)


def test_calibrated_schemes_need_their_data_and_bad_input_exits_2(root, tmp_path):
    done = run("--scheme", "int4", "--checkpoint", str(checkpoint(root)), "--out", str(tmp_path / "o"))
    assert done.returncode == 2 and "--calibration: --scheme int4 reads calibration data" in done.stderr
    (tmp_path / "cal").mkdir()
    (tmp_path / "cal" / "calibration.jsonl").write_text('{"txt": "x"}\n', encoding="utf-8")
    done = run("--scheme", "int8", "--checkpoint", str(checkpoint(root)), "--calibration", str(tmp_path / "cal"),
               "--out", str(tmp_path / "o"))  # fmt: skip
    assert done.returncode == 2 and done.stderr.startswith("error: ") and "calibration.jsonl:1" in done.stderr
    done = run("--scheme", "fp8", "--checkpoint", str(tmp_path), "--out", str(tmp_path / "o"))
    assert done.returncode == 2 and done.stderr.startswith("error: ") and not (tmp_path / "o").exists()


def test_the_jobs_convert_step_runs_as_written(root, tmp_path):
    """cuda-int4's `convert` script itself (heredocs, the program files, the command), run by sh with /work/ moved
    under tmp_path and the converter image's python as the converter environment's: the same artefact as
    compress.py run directly (llm-compressor takes the calibration data in file order, so it is reproducible)."""
    from infra.ops.promotion import jobs
    from infra.ops.promotion.recipes import CONVERTER_PYTHON, RECIPES

    work = tmp_path / "work"
    shutil.copytree(checkpoint(root), work / "checkpoint")
    shutil.copytree(calibration(root), work / "calibration")  # as `fetch` copies the calibration prefix
    script = jobs.convert_script(RECIPES["cuda-int4"]).replace("/work/", f"{work}/")
    script = script.replace(CONVERTER_PYTHON, str(CONVERTER))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **kernel_env()}
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    for name in RECIPES["cuda-int4"].programs:
        assert (work / name).read_text(encoding="utf-8") == (Path(compress.__file__).with_name(name)).read_text(
            encoding="utf-8"
        )
    expected, _ = compressed(root, "int4")
    _, written = tiny_llama.read_artefact(work / "out")
    _, direct = tiny_llama.read_artefact(expected)
    assert written.keys() == direct.keys() and all(torch.equal(written[k], direct[k]) for k in direct)
