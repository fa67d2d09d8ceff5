"""The quality gate's programs for real, on CPU: a tiny causal LM trained here (tiny_lm.py), quantised by
quantize.py, evaluated against itself by evaluate.py and judged by quality.py. A correct INT8 and INT4 variant
pass the default budget; the same methods with a wrong scale fail it, for the reasons the gate names."""

from __future__ import annotations

import copy
import functools
import json
import math
import re

import pytest
import torch

from infra.ops.promotion import evaluate, quality, quantize
from tests.infra.ops.promotion import tiny_lm


@functools.cache
def evaluation() -> tuple[list[list[int]], list[tuple[list[int], list[int]]], list[torch.Tensor]]:
    _, text = tiny_lm.trained()
    held_out = [text.encode("\n" + line) for line in text.held_out]
    calibration = [torch.tensor([text.encode(line + "\n")]) for line in text.train.splitlines()[:8]]
    return held_out, text.tasks(), calibration


@functools.cache
def variant(method: str, scale_error: float = 1.0) -> tuple[quantize.QuantisationReport, evaluate.Comparison]:
    reference, _ = tiny_lm.trained()
    held_out, tasks, calibration = evaluation()
    model = copy.deepcopy(reference)
    report = quantize.quantise_model(model, method, calibration, scale_error=scale_error)
    return report, evaluate.compare(reference, model, held_out, tasks)


def test_the_reference_learned_the_corpus_and_the_facts():
    _, comparison = variant("int8-weight-only")
    assert comparison.exact_match_reference >= 0.75  # the task score has room to drop
    assert comparison.perplexity_reference < 12  # of ~35 characters
    assert comparison.tasks == 24 and comparison.sequences == 6 and comparison.tokens > 400


@pytest.mark.parametrize("method", ["int8-weight-only", "int8", "int4-awq"])
def test_a_correct_variant_passes_the_default_gate(method):
    report, comparison = variant(method)
    verdict = quality.judge(comparison.as_dict(), quality.Budget())
    assert verdict == quality.Verdict(True, ()), comparison.as_dict()
    assert report.layers == 8  # qkv, proj, up, down of two blocks; lm_head kept
    low, high = comparison.perplexity_increase_ci95
    assert low <= comparison.perplexity_increase <= high


def test_int4_holds_weights_in_about_half_a_byte_and_int8_in_one():
    int4, _ = variant("int4-awq")
    int8, _ = variant("int8-weight-only")
    assert 0.5 < int4.bytes_per_weight < 0.6  # 4 bits + one 16-bit scale per 32 weights = 0.5625
    assert 1.0 < int8.bytes_per_weight < 1.05
    assert set(int4.awq_alphas) == {f"blocks.{b}.{layer}" for b in (0, 1) for layer in ("qkv", "proj", "up", "down")}


@pytest.mark.parametrize(("method", "scale_error"), [("int8-weight-only", 0.05), ("int4", 0.2)])
def test_a_variant_quantised_with_a_wrong_scale_fails_the_gate(method, scale_error):
    _, comparison = variant(method, scale_error)
    verdict = quality.judge(comparison.as_dict(), quality.Budget())
    assert not verdict.passed
    assert comparison.perplexity_increase > 0.05 and comparison.task_drop > 0.05
    perplexity, exact_match = verdict.reasons
    # Each reason names the measured figure, the reference's and the budget. The figures are the evaluation's
    # floats (torch's reductions: their last digits differ between CPUs and thread counts), rendered once by the
    # gate from quality.json's rounded copy, so the test reads them back with the rendering's tolerance.
    measured, reference = figures_in(
        r"held-out perplexity ([\d.]+) is [\d.]+% above the reference's ([\d.]+) \(budget 5\.0%\)", perplexity
    )
    assert measured == pytest.approx(comparison.perplexity_variant, abs=1e-3)
    assert reference == pytest.approx(comparison.perplexity_reference, abs=1e-3)
    measured, reference = figures_in(
        r"exact match ([\d.]+)% is [\d.]+ points below the reference's ([\d.]+)% over 24 tasks "
        r"\(budget 5\.0 points\)",
        exact_match,
    )
    assert measured == pytest.approx(comparison.exact_match_variant * 100, abs=0.1)
    assert reference == pytest.approx(comparison.exact_match_reference * 100, abs=0.1)


def leaves(figures: dict) -> dict[str, float]:
    """quality.json's numbers by their path ("perplexity.increaseCi95.0")."""
    found: dict[str, float] = {}
    for key, value in figures.items():
        if isinstance(value, dict):
            found.update({f"{key}.{k}": v for k, v in leaves(value).items()})
        elif isinstance(value, list):
            found.update({f"{key}.{i}": v for i, v in enumerate(value)})
        else:
            found[key] = value
    return found


def figures_in(pattern: str, reason: str) -> tuple[float, ...]:
    found = re.fullmatch(pattern, reason)
    assert found, reason
    return tuple(float(group) for group in found.groups())


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="this torch has no float8_e4m3fn")
def test_fp8_w8a8_is_evaluated_like_the_others():
    _, comparison = variant("fp8")
    assert math.isfinite(comparison.perplexity_variant) and 0 <= comparison.exact_match_variant <= 1


def test_the_program_reads_the_registry_data_layout_and_writes_quality_json(tmp_path, capsys):
    reference, text = tiny_lm.trained()
    _, tasks, calibration = evaluation()
    variant_model = copy.deepcopy(reference)
    quantize.quantise_model(variant_model, "int4", calibration, scale_error=0.2)  # broken on purpose
    models = {"ref": reference, "var": variant_model}
    data = text.write_evaluation(tmp_path / "datasets" / "evals" / "facts")
    out = tmp_path / "quality.json"
    argv = ["--reference", "ref", "--variant", "var", "--data", str(data), "--out", str(out)]
    assert evaluate.main(argv, load=lambda path: (models[path], text.encode)) == 0
    written = json.loads(out.read_text(encoding="utf-8"))
    # The same figures as the library's comparison (two runs of torch's reductions: equal to their rounding).
    assert leaves(written) == pytest.approx(leaves(variant("int4", 0.2)[1].as_dict()), abs=1e-4)
    verdict = quality.judge(written, quality.Budget())
    assert not verdict.passed
    (data / "tasks.jsonl").write_text('{"prompt": "code of amber is"}\n', encoding="utf-8")
    assert evaluate.main(argv, load=lambda path: (models[path], text.encode)) == 2
    assert capsys.readouterr().err == f"error: {data / 'tasks.jsonl'}:1: needs 'prompt' and 'answer' as text\n"


def digits_clipped() -> evaluate.Comparison:
    """A variant whose quantiser clipped only the lm_head rows of the digits (scale x0.3): the prose the
    held-out set holds hardly moves, the facts' codes are lost - the AutoAWQ 475 pattern in small."""
    reference, text = tiny_lm.trained()
    held_out, tasks, _ = evaluation()
    model = copy.deepcopy(reference)
    rows = [text.vocabulary.index(c) for c in "0123456789"]
    weight = model.lm_head.weight.data
    values, scale = quantize.int8_weights(weight[rows], scale_error=0.3)
    weight[rows] = quantize.dequantise(values, scale)
    return evaluate.compare(reference, model, held_out, tasks)


def test_perplexity_alone_would_pass_a_variant_the_task_score_fails():
    comparison = digits_clipped()
    assert abs(comparison.perplexity_increase) < 0.01 and comparison.task_drop > 0.2
    verdict = quality.judge(comparison.as_dict(), quality.Budget())
    (reason,) = verdict.reasons
    (measured,) = figures_in(r"exact match ([\d.]+)% is .* \(budget 5\.0 points\)", reason)
    assert measured == pytest.approx(comparison.exact_match_variant * 100, abs=0.1)


def test_the_program_holds_one_model_at_a_time(tmp_path):
    """The reference is measured and let go before the variant is loaded: the Job's memory is one model's."""
    import weakref

    reference, text = tiny_lm.trained()
    data = tmp_path / "data"
    data.mkdir()
    (data / "held-out.jsonl").write_text(
        "".join(json.dumps({"text": "\n" + line}) + "\n" for line in text.held_out[:2]), encoding="utf-8"
    )
    (data / "tasks.jsonl").write_text('{"prompt": "\\ncode of amber is ", "answer": "840."}\n', encoding="utf-8")
    loaded: dict[str, weakref.ref] = {}

    def load(path: str):
        if path == "var":
            assert loaded["ref"]() is None, "the reference is still in memory"
        model = copy.deepcopy(reference)
        loaded[path] = weakref.ref(model)
        return (lambda ids: model(ids)), text.encode

    argv = ["--reference", "ref", "--variant", "var", "--data", str(data), "--out", str(tmp_path / "q.json")]
    assert evaluate.main(argv, load=load) == 0
    assert set(loaded) == {"ref", "var"}
    assert json.loads((tmp_path / "q.json").read_text(encoding="utf-8"))["perplexity"]["increase"] == 0


def test_a_reference_measured_once_gives_each_variant_the_same_figures(tmp_path, capsys):
    """--save-reference measures the reference alone; a variant judged against those figures gets exactly the
    figures of the run that measured both (the measurement is kept whole, not rounded)."""
    reference, text = tiny_lm.trained()
    _, _, calibration = evaluation()
    variant_model = copy.deepcopy(reference)
    quantize.quantise_model(variant_model, "int8", calibration)
    models = {"ref": reference, "var": variant_model}

    def load(path: str):
        return models[path], text.encode

    data = text.write_evaluation(tmp_path / "data")
    figures = tmp_path / "reference.json"
    assert evaluate.main(["--reference", "ref", "--data", str(data), "--save-reference", str(figures)], load=load) == 0
    assert not (tmp_path / "quality.json").exists()
    both, alone = tmp_path / "both.json", tmp_path / "alone.json"
    assert evaluate.main(["--reference", "ref", "--variant", "var", "--data", str(data), "--out", str(both)], load) == 0
    seen = []
    argv = ["--reference-figures", str(figures), "--variant", "var", "--data", str(data), "--out", str(alone)]
    assert evaluate.main(argv, load=lambda path: seen.append(path) or load(path)) == 0
    assert seen == ["var"]  # the reference is not loaded again
    assert json.loads(alone.read_text(encoding="utf-8")) == json.loads(both.read_text(encoding="utf-8"))
    capsys.readouterr()

    # Figures of other evaluation data, or a variant whose tokenizer encodes it otherwise, are refused.
    with (data / "tasks.jsonl").open("a", encoding="utf-8") as tasks:
        tasks.write('{"prompt": "\\ncode of amber is ", "answer": "840."}\n')
    assert evaluate.main(argv, load=load) == 2
    assert capsys.readouterr().err == f"error: {figures}: the reference was measured on other evaluation data\n"
    evaluate.main(["--reference", "ref", "--data", str(data), "--save-reference", str(figures)], load=load)
    argv = ["--reference-figures", str(figures), "--variant", "var", "--data", str(data), "--out", str(alone)]
    assert evaluate.main(argv, load=lambda path: (models[path], lambda s: text.encode(s)[::-1])) == 2
    assert "the variant's tokenizer encodes the evaluation otherwise" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--reference", "r", "--data", "d"], "--variant is required unless --save-reference"),
        (["--reference-figures", "f", "--save-reference", "s", "--data", "d"], "--save-reference needs --reference"),
        (["--reference", "r", "--variant", "v", "--data", "d"], "--variant and --out go together"),
        (["--reference", "r", "--reference-figures", "f", "--data", "d"], "not allowed with argument"),
    ],
)
def test_the_programs_modes_are_refused_when_mixed(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        evaluate.main(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err
