"""The tiny models' recorded weights: each recipe still learns when trained here and now (with margins another
CPU's kernels cannot cross), and a recorded file that no longer matches its recipe fails with the command that
records it anew."""

from __future__ import annotations

import pytest

from infra.ops.promotion import evaluate
from tests.infra.ops.promotion import tiny_llama, tiny_lm, trained_weights


@pytest.mark.parametrize("recipe", [tiny_lm.RECIPE, tiny_llama.RECIPE], ids=lambda r: r.name)
def test_the_recipe_learns_the_corpus_and_the_facts_when_trained_now(recipe):
    text = tiny_lm.corpus()
    model = recipe.train_now()
    held_out = [text.encode("\n" + line) for line in text.held_out]
    learned = evaluate.compare(model, model, held_out, text.tasks())
    # A model that learned nothing is at the vocabulary's ~40 characters; the recorded ones are near 10 (tiny_lm)
    # and 10 to 14 (tiny_llama, across CPU kernels), with 22 to 24 of the 24 facts.
    assert learned.perplexity_reference < 20
    assert learned.exact_match_reference >= 0.6


def test_the_recorded_weights_are_the_recipes():
    for recipe in (tiny_lm.RECIPE, tiny_llama.RECIPE):
        model, _ = recipe.trained()
        assert not model.training


def test_weights_of_another_recipe_fail_with_the_command_that_records_them(monkeypatch):
    text = tiny_lm.corpus()
    recipe = tiny_lm.RECIPE
    with pytest.raises(pytest.fail.Exception) as failed:
        trained_weights.load(recipe.file, recipe.untrained(text), "another recipe's fingerprint")
    assert str(failed.value) == (
        "tests/infra/ops/promotion/data/trained/tiny-lm-250-0.safetensors was trained by another recipe (corpus, "
        "steps, seed or the model's source changed): record it anew with "
        "`python -m tests.infra.ops.promotion.trained_weights`"
    )
    monkeypatch.setattr(trained_weights, "TRAINED", trained_weights.TRAINED / "nowhere")
    with pytest.raises(pytest.fail.Exception) as failed:
        trained_weights.load(recipe.file, recipe.untrained(text), recipe.fingerprint())
    assert str(failed.value) == (
        "tests/infra/ops/promotion/data/trained/nowhere/tiny-lm-250-0.safetensors is missing: record it with "
        "`python -m tests.infra.ops.promotion.trained_weights`"
    )
