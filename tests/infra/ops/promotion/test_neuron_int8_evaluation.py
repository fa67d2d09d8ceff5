"""The neuron-int8 evaluation for real, on CPU: NxD Inference's quantized checkpoint of the tiny Llama (written in
its recorded format, nxd_format.py) is loaded by evaluate.py's load_nxd_int8 into the reference's architecture and
evaluated against the reference; a correct variant passes the default gate, one quantised with a wrong scale fails
it. The program's own loader builds a real transformers LlamaForCausalLM from such an artefact."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from infra.ops.promotion import evaluate, evaluation, quality, quantize
from infra.serving import engine
from tests.infra.ops.promotion import nxd_format, tiny_llama


def artefact(root: Path, scale_error: float = 1.0, shards: int = 1) -> Path:
    return _artefact(root, scale_error, shards)


@functools.cache
def _artefact(root: Path, scale_error: float, shards: int) -> Path:
    """The variant directory as the Job fetches it: config.json and NxD Inference's quantized checkpoint."""
    model, text = tiny_llama.trained()
    out = root / f"variant-{scale_error}-{shards}"
    out.mkdir()
    (out / "config.json").write_text(json.dumps(tiny_llama.config(len(text.vocabulary))), encoding="utf-8")
    quantized = nxd_format.quantized_state(model.state_dict(), scale_error=scale_error)
    nxd_format.save(quantized, out / engine.NEURON_QUANTIZED_DIR, shards)
    return out


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("neuron-int8")


def loaded(directory: Path) -> torch.nn.Module:
    _, text = tiny_llama.trained()
    model = tiny_llama.TinyLlama(len(text.vocabulary))
    return evaluate.load_nxd_int8(model, directory / engine.NEURON_QUANTIZED_DIR)


@functools.cache
def comparison(root: Path, scale_error: float) -> evaluate.Comparison:
    reference, text = tiny_llama.trained()
    held_out = [text.encode("\n" + line) for line in text.held_out]
    return evaluate.compare(reference, loaded(artefact(root, scale_error)), held_out, text.tasks())


def test_the_quantised_layers_are_the_int8_values_times_their_scale_and_the_rest_as_it_was(root):
    reference, _ = tiny_llama.trained()
    variant = loaded(artefact(root))
    quantised = 0
    for name, weight in reference.state_dict().items():
        got = variant.state_dict()[name]
        layer = name.removesuffix(".weight")
        if weight.dim() == 2 and layer.split(".")[-1] in {n.split(".")[-1] for n in tiny_llama.LINEARS}:
            values, scale = quantize.int8_weights(weight.float(), scale_dtype=torch.float32)
            assert torch.equal(got, quantize.dequantise(values, scale)), name
            assert not torch.equal(got, weight), name
            quantised += 1
        else:  # embeddings, norms and lm_head (modules_to_not_convert)
            assert torch.equal(got, weight), name
    assert quantised == tiny_llama.LAYERS * len(tiny_llama.LINEARS)


def test_sharded_with_a_scale_in_another_file_loads_the_same(root):
    one, three = loaded(artefact(root)), loaded(artefact(root, shards=3))
    index = json.loads(
        (artefact(root, shards=3) / engine.NEURON_QUANTIZED_DIR / "model.safetensors.index.json").read_text(
            encoding="utf-8"
        )
    )
    weight_map = index["weight_map"]
    assert any(
        weight_map[k] != weight_map[k.removesuffix("scale") + "weight"] for k in weight_map if k.endswith(".scale")
    )
    for name, tensor in one.state_dict().items():
        assert torch.equal(tensor, three.state_dict()[name]), name


def test_a_correct_variant_passes_the_default_gate(root):
    figures = comparison(root, 1.0)
    assert quality.judge(figures.as_dict(), quality.Budget()) == quality.Verdict(True, ()), figures.as_dict()
    assert figures.exact_match_reference >= 0.75 and abs(figures.perplexity_increase) < 0.01


def test_a_variant_quantised_with_a_wrong_scale_fails_it(root):
    figures = comparison(root, scale_error=0.05)
    verdict = quality.judge(figures.as_dict(), quality.Budget())
    assert not verdict.passed
    assert [reason.split(" ", 1)[0] for reason in verdict.reasons] == ["held-out", "exact"], verdict.reasons


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda t: t.pop("layers.0.self_attn.q_proj.scale"), "int8 layers.0.self_attn.q_proj.weight has no "),
        (lambda t: t.pop("layers.1.mlp.down_proj.weight"), "layers.1.mlp.down_proj.scale scales no weight"),
        (lambda t: t.pop("norm.weight"), "no model.norm.weight"),
        (lambda t: t.update({"layers.9.mlp.up_proj.bias": torch.zeros(4)}), "layers.9.mlp.up_proj.bias is no tensor"),
        (lambda t: t.update({"norm.weight": torch.ones(3)}), "norm.weight is [3], the model's [128]"),
    ],
)
def test_a_damaged_checkpoint_is_refused_naming_the_tensor(tmp_path, damage, message):
    model, _ = tiny_llama.trained()
    tensors = nxd_format.quantized_state(model.state_dict())
    damage(tensors)
    nxd_format.save(tensors, tmp_path / engine.NEURON_QUANTIZED_DIR)
    with pytest.raises(evaluate.BadArtefact, match=message.replace("[", r"\[").replace("]", r"\]")):
        loaded(tmp_path)


def test_the_job_ships_the_loader_and_the_artefact_directory_is_the_servers():
    assert evaluate.NXD_QUANTIZED == engine.NEURON_QUANTIZED_DIR
    assert "def load_nxd_int8(" in evaluation.EVALUATE


def _tokenizer(directory: Path, vocabulary: list[str]) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    words = tokenizers.Tokenizer(tokenizers.models.WordLevel({w: i for i, w in enumerate(vocabulary)}, unk_token="u"))
    words.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=words, unk_token="u").save_pretrained(directory)


def test_the_program_evaluates_a_real_llama_artefact_on_the_cpu(tmp_path):
    """The shipped evaluate.py, run alone as the Job runs it: a bf16 LlamaForCausalLM written by transformers is the
    reference; its neuron-int8 artefact (config, tokenizer, neuron-quantized/) is built by the program's loader
    from the config with the dequantised weights; quality.json passes the default gate."""
    transformers = pytest.importorskip("transformers")
    vocabulary = ["u"] + [f"w{i}" for i in range(63)]
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=64, dtype="bfloat16", tie_word_embeddings=False,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(tmp_path / "reference", safe_serialization=True)
    _tokenizer(tmp_path / "reference", vocabulary)
    variant = tmp_path / "variant"
    variant.mkdir()
    for path in (tmp_path / "reference").iterdir():
        if not path.name.endswith(".safetensors"):
            (variant / path.name).write_bytes(path.read_bytes())
    nxd_format.save(nxd_format.quantized_state(model.state_dict()), variant / engine.NEURON_QUANTIZED_DIR)
    data = tmp_path / "data"
    data.mkdir()
    (data / "held-out.jsonl").write_text(
        "".join(json.dumps({"text": f"w{i} w{i + 1} w{i + 2}"}) + "\n" for i in range(8)), encoding="utf-8"
    )
    (data / "tasks.jsonl").write_text(
        "".join(json.dumps({"prompt": f"w{i}", "answer": " w1"}) + "\n" for i in range(4)), encoding="utf-8"
    )
    program = tmp_path / "evaluate.py"
    program.write_text(evaluation.EVALUATE, encoding="utf-8")
    argv = ["--reference", str(tmp_path / "reference"), "--variant", str(variant), "--data", str(data)]
    done = subprocess.run(
        [sys.executable, "-I", str(program), *argv, "--out", str(tmp_path / "quality.json")],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    figures = json.loads((tmp_path / "quality.json").read_text(encoding="utf-8"))
    assert quality.judge(figures, quality.Budget()).passed, figures
    assert figures["perplexity"]["increase"] != 0 or figures["perplexity"]["reference"] > 0
    # The loader's weights, read back the same way: bf16 of int8 values x scale, lm_head as it was.
    built = evaluate.load_nxd_int8(
        transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16), variant / "neuron-quantized"
    )
    q = model.model.layers[0].self_attn.q_proj.weight.float()
    values, scale = quantize.int8_weights(q, scale_dtype=torch.float32)
    assert torch.equal(built.model.layers[0].self_attn.q_proj.weight, quantize.dequantise(values, scale).bfloat16())
    assert torch.equal(built.lm_head.weight, model.lm_head.weight)


def test_a_broken_artefact_exits_2_with_one_line(tmp_path, capsys):
    (tmp_path / "variant" / "neuron-quantized").mkdir(parents=True)
    data = tmp_path / "data"
    data.mkdir()
    (data / "held-out.jsonl").write_text('{"text": "a b"}\n', encoding="utf-8")
    (data / "tasks.jsonl").write_text('{"prompt": "a", "answer": "b"}\n', encoding="utf-8")

    def load(path: str) -> tuple[evaluate.Model, evaluate.Encode]:
        evaluate.load_nxd_int8(torch.nn.Linear(1, 1), Path(path) / "neuron-quantized")
        raise AssertionError("unreachable")

    argv = ["--reference", str(tmp_path / "variant"), "--variant", str(tmp_path / "variant"), "--data", str(data)]
    assert evaluate.main([*argv, "--out", str(tmp_path / "q.json")], load) == 2
    assert capsys.readouterr().err == (
        f"error: {tmp_path}/variant/neuron-quantized: neither model.safetensors nor model.safetensors.index.json\n"
    )
