"""The quality gate of a quantised variant (pure): its evaluation figures against the budget it is held to.

The evaluation (evaluate.py, in a Job on the variant's serving hardware) runs the same fixed evaluation on the
bf16 reference and on the variant and writes `quality.json` next to the artefact: held-out perplexity and
exact match on a task set, with sample sizes and 95% intervals. The gate passes when the perplexity increase
(relative) and the exact-match drop (absolute) are each within budget; it judges the point estimates and the
manifest records the intervals beside them, so a reader sees how much a small sample can say. A variant that
fails leaves its version marked _FAILED and the alias unmoved, like a failed conversion.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infra.core.errors import Problem

QUALITY_FILE = "quality.json"
DEFAULT_MAX_PERPLEXITY_INCREASE = 0.05  # ppl(variant) / ppl(reference) - 1
DEFAULT_MAX_TASK_DROP = 0.05  # exact match, reference - variant, as a share of the tasks


@dataclass(frozen=True)
class Budget:
    max_perplexity_increase: float = DEFAULT_MAX_PERPLEXITY_INCREASE
    max_task_drop: float = DEFAULT_MAX_TASK_DROP

    def as_dict(self) -> dict[str, float]:
        return {"maxPerplexityIncrease": self.max_perplexity_increase, "maxTaskDrop": self.max_task_drop}


def budget(max_perplexity_increase: float | None, max_task_drop: float | None) -> tuple[Budget, list[Problem]]:
    """The budget of the promote flags (defaults when unset) and the problems of bad values."""
    ppl = DEFAULT_MAX_PERPLEXITY_INCREASE if max_perplexity_increase is None else max_perplexity_increase
    drop = DEFAULT_MAX_TASK_DROP if max_task_drop is None else max_task_drop
    problems = []
    if not (math.isfinite(ppl) and 0 <= ppl <= 1):
        problems.append(
            Problem(
                "--max-perplexity-increase",
                f"{ppl:g} is not a relative increase from 0 to 1 (0.05: the variant's held-out perplexity at "
                "most 5% above the bf16 reference's)",
            )
        )
    if not (math.isfinite(drop) and 0 <= drop <= 1):
        problems.append(
            Problem(
                "--max-task-drop",
                f"{drop:g} is not a share from 0 to 1 (0.05: exact match at most 5 points below the reference's)",
            )
        )
    return Budget(ppl, drop), problems


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reasons: tuple[str, ...]  # why it failed; empty when it passed


class NotQualityFigures(ValueError):
    """quality.json is not what the evaluation writes."""


def _number(raw: Mapping[str, Any], *path: str) -> float:
    value: Any = raw
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise NotQualityFigures(f"{QUALITY_FILE}: {'.'.join(path)} is not a number")
    return float(value)


def judge(figures: Mapping[str, Any], limits: Budget) -> Verdict:
    """The gate's verdict on the evaluation's figures (evaluate.Comparison.as_dict())."""
    increase = _number(figures, "perplexity", "increase")
    drop = _number(figures, "exactMatch", "drop")
    for key in (("perplexity", "tokens"), ("exactMatch", "tasks")):
        if _number(figures, *key) < 1:
            raise NotQualityFigures(f"{QUALITY_FILE}: {'.'.join(key)} is 0: nothing was evaluated")
    reasons = []
    if increase > limits.max_perplexity_increase:
        reasons.append(
            f"held-out perplexity {_number(figures, 'perplexity', 'variant'):.3f} is {increase:.1%} above the "
            f"reference's {_number(figures, 'perplexity', 'reference'):.3f} (budget "
            f"{limits.max_perplexity_increase:.1%})"
        )
    if drop > limits.max_task_drop:
        reasons.append(
            f"exact match {_number(figures, 'exactMatch', 'variant'):.1%} is {drop * 100:.1f} points below the "
            f"reference's {_number(figures, 'exactMatch', 'reference'):.1%} over "
            f"{_number(figures, 'exactMatch', 'tasks'):.0f} tasks (budget {limits.max_task_drop * 100:.1f} points)"
        )
    for task, scored in sorted((figures.get("lmEval") or {}).items()):  # lm-eval's tasks, each held to the budget
        task_drop = _number(figures, "lmEval", task, "drop")
        if task_drop > limits.max_task_drop:
            variant, reference = (_number(figures, "lmEval", task, key) for key in ("variant", "reference"))
            reasons.append(
                f"lm-eval task {task}: {scored.get('metric', 'score')} {variant:.3f} is {task_drop * 100:.1f} points "
                f"below the reference's {reference:.3f} (budget {limits.max_task_drop * 100:.1f} points)"
            )
    return Verdict(not reasons, tuple(reasons))


def manifest_block(
    method: str,
    precision: Mapping[str, str],
    figures: Mapping[str, Any],
    limits: Budget,
    verdict: Verdict,
    data: Mapping[str, str],
) -> dict[str, Any]:
    """What the manifest records of a gated variant."""
    return {
        "method": method,
        "precision": dict(precision),
        "data": dict(data),
        "figures": dict(figures),
        "budget": limits.as_dict(),
        "passed": verdict.passed,
        **({"reasons": list(verdict.reasons)} if verdict.reasons else {}),
    }
