"""The quality gate's parts without a model: the quantisers' ranges and errors, the intervals, the verdict's
exact messages and the budget flags."""

from __future__ import annotations

import pytest
import torch

from infra.ops.promotion import evaluate, quality, quantize


def weights() -> torch.Tensor:
    return torch.randn(16, 64, generator=torch.Generator().manual_seed(1))


def test_int8_rounds_to_within_half_a_step_per_row():
    w = weights()
    values, scale = quantize.int8_weights(w)
    assert values.dtype == torch.int8 and scale.shape == (16, 1)
    assert int(values.abs().max()) == 127  # each row's largest weight lands on the end of the range
    assert bool(((quantize.dequantise(values, scale) - w).abs() <= scale / 2 + 1e-7).all())


def test_int4_uses_minus_8_to_7_per_group_and_a_wrong_scale_clips():
    w = weights()
    values, scale = quantize.int4_weights(w, 32)
    assert scale.shape == (16, 2, 1) and int(values.min()) >= -8 and int(values.max()) <= 7
    error = (quantize.dequantise(values, scale, 32) - w).abs().max()
    broken, broken_scale = quantize.int4_weights(w, 32, scale_error=0.2)
    assert (quantize.dequantise(broken, broken_scale, 32) - w).abs().max() > 5 * error
    with pytest.raises(ValueError, match="48 input channels are not a multiple of the group size 32"):
        quantize.int4_weights(w[:, :48], 32)


def test_fp8_holds_e4m3_values():
    values, scale = quantize.fp8_weights(weights())
    assert values.dtype == torch.float8_e4m3fn
    assert float(values.to(torch.float32).abs().max()) == quantize.FP8_MAX


def test_an_unknown_method_and_awq_without_calibration_are_refused():
    layer = torch.nn.Sequential(torch.nn.Linear(32, 32))
    with pytest.raises(ValueError, match="unknown method 'int3'; one of int8-weight-only, int8, int4, int4-awq, fp8"):
        quantize.quantise_model(layer, "int3")
    with pytest.raises(ValueError, match="int4-awq needs calibration batches"):
        quantize.quantise_model(layer, "int4-awq")


def test_wilson_interval():
    low, high = evaluate.wilson(23, 24)
    assert (round(low, 4), round(high, 4)) == (0.7976, 0.9926)  # by hand: centre 0.8951, half-width 0.0975
    assert evaluate.wilson(0, 24)[0] == 0.0 and evaluate.wilson(0, 0) == (0.0, 1.0)


def test_bootstrap_intervals_are_paired_and_reproducible():
    same = [(10.0, 5), (12.0, 6), (9.0, 5)]
    assert evaluate.perplexity_increase_interval(same, same) == (0.0, 0.0)
    ref, var = [True] * 20 + [False] * 4, [True] * 18 + [False] * 6
    assert evaluate.drop_interval(ref, var) == evaluate.drop_interval(ref, var)
    low, high = evaluate.drop_interval(ref, var)
    assert 0.0 <= low <= 2 / 24 <= high <= 0.25


def figures(increase: float, drop: float) -> dict:
    return {
        "perplexity": {"tokens": 450, "reference": 8.0, "variant": 8.0 * (1 + increase), "increase": increase},
        "exactMatch": {"tasks": 24, "reference": 0.875, "variant": 0.875 - drop, "drop": drop},
    }


def test_the_verdict_names_each_figure_out_of_budget():
    assert quality.judge(figures(0.05, 0.05), quality.Budget()) == quality.Verdict(True, ())
    assert quality.judge(figures(0.2, 0.25), quality.Budget()).reasons == (
        "held-out perplexity 9.600 is 20.0% above the reference's 8.000 (budget 5.0%)",
        "exact match 62.5% is 25.0 points below the reference's 87.5% over 24 tasks (budget 5.0 points)",
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({}, "quality.json: perplexity.increase is not a number"),
        ({**figures(0, 0), "exactMatch": {"drop": "0"}}, "quality.json: exactMatch.drop is not a number"),
        (
            {**figures(0, 0), "exactMatch": {"drop": 0.0, "tasks": 0}},
            "quality.json: exactMatch.tasks is 0: nothing was evaluated",
        ),
    ],
)
def test_figures_that_are_not_the_evaluations_are_refused(raw, message):
    with pytest.raises(quality.NotQualityFigures, match=message):
        quality.judge(raw, quality.Budget())


def test_budget_flags():
    assert quality.budget(None, None) == (quality.Budget(0.05, 0.05), [])
    limits, problems = quality.budget(-0.1, float("nan"))
    assert [str(p) for p in problems] == [
        "--max-perplexity-increase: -0.1 is not a relative increase from 0 to 1 (0.05: the variant's held-out "
        "perplexity at most 5% above the bf16 reference's)",
        "--max-task-drop: nan is not a share from 0 to 1 (0.05: exact match at most 5 points below the reference's)",
    ]
