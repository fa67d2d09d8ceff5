"""What `promote` checks of the variants it is asked for, and the quality gate it applies to quantised ones.

Before anything is written: every variant needs a node pool of the serving stack whose devices run it
(infra/serving/variants.py), a conversion recipe (recipes.py), and a quantised one its calibration and
evaluation data in the registry (datasets/calibration/..., datasets/evals/...; read by the Jobs from there,
never from a hub). After the Jobs: a quantised variant's `quality.json` (the evaluation's figures, evaluate.py)
is judged against the request's budget (quality.py); the verdict and the figures go into its manifest, and a
variant out of budget fails the promotion like a failed conversion (version marked, alias unmoved).
"""

from __future__ import annotations

import json
from typing import Any

from infra.core.errors import InputError, Problem
from infra.ops.promotion import quality
from infra.ops.promotion.ports import ObjectStore
from infra.ops.promotion.recipes import RECIPES
from infra.ops.promotion.request import Promotion
from infra.serving.variants import VARIANTS, describe_pools, hardware_refusal, pools_for, precision_label


def check_buildable(req: Promotion, declared: list[str]) -> None:
    """InputError (--variants) for each variant the stack has no pool for, or no recipe builds."""
    problems = []
    for variant in req.variants:
        able = [pool for pool in declared if hardware_refusal(variant, pool) is None]
        if not able:
            problems.append(
                Problem(
                    "--variants",
                    f"{variant} ({precision_label(VARIANTS[variant].precision)}) cannot run on any node pool of "
                    f"stack {req.stack} ({', '.join(declared)}); pools that can: {describe_pools(pools_for(variant))}",
                )
            )
        elif variant not in RECIPES:
            problems.append(
                Problem(
                    "--variants",
                    f"{variant} would run on {', '.join(able)}, but this mlinfra has no conversion recipe for it "
                    '(docs/registry-and-promotion.md, "Quantised variants"); it builds '
                    f"{', '.join(RECIPES)}",
                )
            )
    if problems:
        raise InputError(problems)


def check_converter(req: Promotion, converter_image: str | None) -> None:
    """InputError when a variant is built by llm-compressor and the serving stack names no converter image."""
    built = [variant for variant in req.variants if variant in RECIPES and RECIPES[variant].converter]
    if built and converter_image is None:
        raise InputError(
            Problem(
                "mlinfra:serving.converterImage",
                f"{', '.join(built)} {'is' if len(built) == 1 else 'are'} built by llm-compressor in the converter "
                f"image, and stack {req.stack} names none: build images/converter/Dockerfile, push it where the "
                "cluster pulls from and set its reference (pinned by tag or digest)",
            )
        )


def check_data(store: ObjectStore, req: Promotion) -> None:
    """InputError when a data prefix the request names holds nothing in the registry."""
    problems = [
        Problem(flag, f"s3://{store.bucket}/{prefix} holds no object; upload the data there first")
        for flag, prefix in (("--calibration-data", req.calibration), ("--eval-data", req.evaluation))
        if prefix is not None and not store.list(prefix)
    ]
    if problems:
        raise InputError(problems)


def judged(store: ObjectStore, prefix: str, variant: str, req: Promotion) -> tuple[dict[str, Any] | None, str | None]:
    """(the manifest's `quality` block, why the gate failed) of a quantised variant; (None, None) for bf16."""
    facts = VARIANTS[variant]
    if not facts.quantised:
        return None, None
    raw = store.get(prefix + quality.QUALITY_FILE)
    if raw is None:
        return None, f"quality gate: the evaluation left no {prefix}{quality.QUALITY_FILE}"
    try:
        figures = json.loads(raw)
        if not isinstance(figures, dict):
            raise quality.NotQualityFigures(f"{quality.QUALITY_FILE} is not a JSON object")
        verdict = quality.judge(figures, req.budget)
    except (ValueError, quality.NotQualityFigures) as error:  # JSONDecodeError is a ValueError
        return None, f"quality gate: {prefix}{quality.QUALITY_FILE}: {error}"
    precision = facts.precision
    block = quality.manifest_block(
        facts.method,
        {"weights": precision.weights, "activations": precision.activations, "kvCache": precision.kv_cache},
        figures,
        req.budget,
        verdict,
        # the data this variant was built and judged with: calibration only where its quantiser reads it
        {
            k: v
            for k, v in (("calibration", req.calibration if facts.calibrated else None), ("evaluation", req.evaluation))
            if v is not None
        },
    )
    return block, None if verdict.passed else f"quality gate: {'; '.join(verdict.reasons)}"
