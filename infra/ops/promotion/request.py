"""What `promote` and `rollback` were asked to do, checked before anything is read or written."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from infra.core.errors import InputError, Problem
from infra.ops.promotion.quality import Budget, budget
from infra.registry.layout import RESERVED_VERSIONS, VERSION_PATTERN
from infra.serving.spec import MODEL_NAME_PATTERN
from infra.serving.variants import VARIANT_NAMES, VARIANTS
from infra.training.spec import RUN_ID_PATTERN

ALIAS_PATTERN = r"[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?"


@dataclass(frozen=True)
class Promotion:
    run_id: str
    model: str
    version: str
    variants: tuple[str, ...]  # empty: those the serving stack's entries of the model serve (promote resolves it)
    alias: str = "production"
    stack: str = "serving-demo"
    checkpoint: str | None = None  # a prefix under checkpoints/<run-id>/; None: the run's final checkpoint
    budget: Budget = field(default_factory=Budget)  # what a quantised variant's quality gate holds it to
    calibration: str | None = None  # datasets/calibration/<name>/: what a calibrated quantiser reads
    evaluation: str | None = None  # datasets/evals/<name>/: the fixed evaluation of the quality gate


# The registry prefixes of the data a quantised variant is built and judged with (never a hub at run time).
DATA_PREFIXES = {"--calibration-data": "datasets/calibration/", "--eval-data": "datasets/evals/"}
DATA_NAME = r"[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?(?:/[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?)*/"


@dataclass(frozen=True)
class Rollback:
    model: str
    alias: str = "production"
    stack: str = "serving-demo"


def promotion(
    run_id: str,
    model: str,
    version: str,
    variants: str | None,
    alias: str,
    stack: str,
    checkpoint: str | None = None,
    *,
    calibration: str | None = None,
    evaluation: str | None = None,
    max_perplexity_increase: float | None = None,
    max_task_drop: float | None = None,
) -> Promotion:
    problems = _common(model, alias)
    if not re.fullmatch(RUN_ID_PATTERN, run_id):
        # The training stack's run id rule; its length also bounds the Jobs' session policy (access.py).
        problems.append(
            Problem(
                "--run-id",
                "a training run id: lowercase letters, digits and '-', at most 40 "
                "characters, starting and ending with a letter or digit",
            )
        )
    problems += version_problems(version)
    names = [] if variants is None else [v.strip() for v in variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if (variants is not None and not names) or unknown:
        problems.append(
            Problem(
                "--variants",
                f"comma-separated, from {', '.join(VARIANT_NAMES)}"
                + (f" (not {', '.join(map(repr, unknown))})" if unknown else ""),
            )
        )
    elif len(set(names)) != len(names):
        problems.append(Problem("--variants", "each variant once"))
    limits, budget_problems = budget(max_perplexity_increase, max_task_drop)
    problems += budget_problems + _data_problems([v for v in names if v in VARIANTS], calibration, evaluation)
    if problems:
        raise InputError(problems)
    return Promotion(run_id, model, version, tuple(names), alias, stack, checkpoint, limits, calibration, evaluation)


def with_variants(req: Promotion, variants: tuple[str, ...], why: str) -> Promotion:
    """`req` building `variants` (the stack's, when --variants was not given); InputError when the data flags do
    not cover them, saying where they came from."""
    problems = _data_problems(list(variants), req.calibration, req.evaluation)
    if problems:
        raise InputError([Problem(p.path, f"{p.message} ({why})") for p in problems])
    return dataclasses.replace(req, variants=variants)


def _data_problems(variants: list[str], calibration: str | None, evaluation: str | None) -> list[Problem]:
    """The data flags: registry prefixes under datasets/, given when a requested variant needs them."""
    problems = []
    for flag, value in (("--calibration-data", calibration), ("--eval-data", evaluation)):
        root = DATA_PREFIXES[flag]
        if value is not None and not re.fullmatch(re.escape(root) + DATA_NAME, value):
            problems.append(
                Problem(
                    flag, f"a registry prefix {root}<name>/ (lowercase letters, digits, '.', '_', '-'), not {value!r}"
                )
            )
    quantised = [v for v in variants if VARIANTS[v].quantised]
    calibrated = [v for v in variants if VARIANTS[v].calibrated]
    if quantised and evaluation is None:
        problems.append(
            Problem(
                "--eval-data",
                f"required for {', '.join(quantised)}: the quality gate's fixed evaluation, a prefix "
                "datasets/evals/<name>/ of the registry holding held-out.jsonl and tasks.jsonl",
            )
        )
    if calibrated and calibration is None:
        problems.append(
            Problem(
                "--calibration-data",
                f"required for {', '.join(calibrated)}: the quantiser's calibration samples, a prefix "
                "datasets/calibration/<name>/ of the registry",
            )
        )
    return problems


def rollback(model: str, alias: str, stack: str) -> Rollback:
    problems = _common(model, alias)
    if problems:
        raise InputError(problems)
    return Rollback(model, alias, stack)


def version_problems(version: str) -> list[Problem]:
    if not re.fullmatch(VERSION_PATTERN, version) or version in RESERVED_VERSIONS:
        return [
            Problem(
                "--version",
                "1-63 letters, digits, '.', '_', '=' or '-', starting with a letter or "
                f"digit, not {', '.join(RESERVED_VERSIONS)}",
            )
        ]
    if re.fullmatch(r"-?\d+|true|false", version):
        # `pulumi config set --path` would store it as a number or boolean, which the serving config refuses.
        return [
            Problem(
                "--version",
                f"{version!r} would be stored as a number or boolean in the stack config; "
                f"use e.g. v{version} or a date like 2026-03-01",
            )
        ]
    return []


def _common(model: str, alias: str) -> list[Problem]:
    problems = []
    if not re.fullmatch(MODEL_NAME_PATTERN, model):
        problems.append(Problem("--model", "a DNS label: lowercase letters, digits and '-', at most 32 characters"))
    if not re.fullmatch(ALIAS_PATTERN, alias):
        problems.append(Problem("--alias", "lowercase letters, digits and '-', at most 32 characters"))
    return problems
