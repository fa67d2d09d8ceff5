"""The quality evaluation a quantised variant is held to: the same fixed evaluation on the bf16 reference and on
the variant (a program: standard library and torch only; its tests run it for real on CPU).

  held-out perplexity  exp(mean negative log-likelihood) of every next token of the held-out sequences, with
                       a 95% paired bootstrap interval of the variant's relative increase (resampling sequences)
  exact match          greedy continuation of each task prompt compared with its answer, token for token; the
                       share right with a 95% Wilson interval, and the paired drop (reference - variant) with a
                       95% paired bootstrap interval (resampling tasks)

A model here is any callable taking a (1, n) tensor of token ids and returning (1, n, vocabulary) logits, or an
object with `.logits` (Hugging Face's output). Perplexity alone is not enough: task scores can collapse while
perplexity stays flat (AutoAWQ issue 475: HumanEval 0.67 -> 0.37), hence both.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

Model = Callable[[torch.Tensor], Any]
Z95 = 1.959964
BOOTSTRAP_SAMPLES = 2000


def _logits(model: Model, ids: Sequence[int]) -> torch.Tensor:
    out = model(torch.tensor([list(ids)], dtype=torch.long))
    return (out.logits if hasattr(out, "logits") else out)[0].float()


def sequence_nll(model: Model, ids: Sequence[int]) -> tuple[float, int]:
    """(summed negative log-likelihood, tokens predicted) of one sequence."""
    with torch.no_grad():
        logits = _logits(model, ids[:-1])
        target = torch.tensor(list(ids[1:]), dtype=torch.long)
        nll = torch.nn.functional.cross_entropy(logits, target, reduction="sum").item()
    return nll, len(ids) - 1


def greedy(model: Model, prompt: Sequence[int], new_tokens: int) -> list[int]:
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(new_tokens):
            ids.append(int(_logits(model, ids)[-1].argmax()))
    return ids[len(prompt) :]


def exact_matches(model: Model, tasks: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[bool]:
    return [greedy(model, prompt, len(answer)) == list(answer) for prompt, answer in tasks]


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _percentiles(values: list[float]) -> tuple[float, float]:
    values.sort()
    return values[int(0.025 * (len(values) - 1))], values[int(0.975 * (len(values) - 1))]


def perplexity_increase_interval(
    reference: Sequence[tuple[float, int]], variant: Sequence[tuple[float, int]], seed: int = 0
) -> tuple[float, float]:
    """95% paired bootstrap interval of ppl(variant) / ppl(reference) - 1, resampling sequences."""
    rng = random.Random(seed)
    n = len(reference)
    draws = []
    for _ in range(BOOTSTRAP_SAMPLES):
        pick = [rng.randrange(n) for _ in range(n)]
        tokens = sum(reference[i][1] for i in pick)
        ref = sum(reference[i][0] for i in pick) / tokens
        var = sum(variant[i][0] for i in pick) / tokens
        draws.append(math.exp(var - ref) - 1)
    return _percentiles(draws)


def drop_interval(reference: Sequence[bool], variant: Sequence[bool], seed: int = 0) -> tuple[float, float]:
    """95% paired bootstrap interval of the exact-match drop (reference - variant), resampling tasks."""
    rng = random.Random(seed)
    n = len(reference)
    draws = []
    for _ in range(BOOTSTRAP_SAMPLES):
        pick = [rng.randrange(n) for _ in range(n)]
        draws.append(sum(int(reference[i]) - int(variant[i]) for i in pick) / n)
    return _percentiles(draws)


@dataclass(frozen=True)
class Comparison:
    """The figures of one variant against its reference on one fixed evaluation."""

    sequences: int
    tokens: int
    perplexity_reference: float
    perplexity_variant: float
    perplexity_increase: float  # relative: ppl(variant) / ppl(reference) - 1
    perplexity_increase_ci95: tuple[float, float]
    tasks: int
    exact_match_reference: float
    exact_match_variant: float
    exact_match_reference_ci95: tuple[float, float]
    exact_match_variant_ci95: tuple[float, float]
    task_drop: float  # exact match, reference - variant (absolute share)
    task_drop_ci95: tuple[float, float]

    def as_dict(self) -> dict[str, Any]:
        def r(x: float) -> float:
            return round(x, 4)

        return {
            "perplexity": {
                "sequences": self.sequences,
                "tokens": self.tokens,
                "reference": r(self.perplexity_reference),
                "variant": r(self.perplexity_variant),
                "increase": r(self.perplexity_increase),
                "increaseCi95": [r(x) for x in self.perplexity_increase_ci95],
            },
            "exactMatch": {
                "tasks": self.tasks,
                "reference": r(self.exact_match_reference),
                "variant": r(self.exact_match_variant),
                "referenceCi95": [r(x) for x in self.exact_match_reference_ci95],
                "variantCi95": [r(x) for x in self.exact_match_variant_ci95],
                "drop": r(self.task_drop),
                "dropCi95": [r(x) for x in self.task_drop_ci95],
            },
        }


def compare(
    reference: Model,
    variant: Model,
    held_out: Sequence[Sequence[int]],
    tasks: Sequence[tuple[Sequence[int], Sequence[int]]],
    seed: int = 0,
) -> Comparison:
    """Run the one evaluation on both models."""
    if not held_out or not tasks:
        raise ValueError("the evaluation needs held-out sequences and tasks")
    ref_nll = [sequence_nll(reference, ids) for ids in held_out]
    var_nll = [sequence_nll(variant, ids) for ids in held_out]
    tokens = sum(n for _, n in ref_nll)
    ppl_ref = math.exp(sum(x for x, _ in ref_nll) / tokens)
    ppl_var = math.exp(sum(x for x, _ in var_nll) / tokens)
    ref_em, var_em = exact_matches(reference, tasks), exact_matches(variant, tasks)
    n = len(tasks)
    return Comparison(
        sequences=len(held_out),
        tokens=tokens,
        perplexity_reference=ppl_ref,
        perplexity_variant=ppl_var,
        perplexity_increase=ppl_var / ppl_ref - 1,
        perplexity_increase_ci95=perplexity_increase_interval(ref_nll, var_nll, seed),
        tasks=n,
        exact_match_reference=sum(ref_em) / n,
        exact_match_variant=sum(var_em) / n,
        exact_match_reference_ci95=wilson(sum(ref_em), n),
        exact_match_variant_ci95=wilson(sum(var_em), n),
        task_drop=(sum(ref_em) - sum(var_em)) / n,
        task_drop_ci95=drop_interval(ref_em, var_em, seed),
    )
