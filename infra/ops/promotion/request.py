"""What `promote` and `rollback` were asked to do, checked before anything is read or written."""

from __future__ import annotations

import re
from dataclasses import dataclass

from infra.core.errors import InputError, Problem
from infra.ops.promotion.recipes import VARIANTS
from infra.registry.layout import RESERVED_VERSIONS, VERSION_PATTERN
from infra.serving.spec import MODEL_NAME_PATTERN
from infra.training.spec import RUN_ID_PATTERN

ALIAS_PATTERN = r"[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?"


@dataclass(frozen=True)
class Promotion:
    run_id: str
    model: str
    version: str
    variants: tuple[str, ...]
    alias: str = "production"
    stack: str = "serving-demo"
    checkpoint: str | None = None  # a prefix under checkpoints/<run-id>/; None: the run's final checkpoint


@dataclass(frozen=True)
class Rollback:
    model: str
    alias: str = "production"
    stack: str = "serving-demo"


def promotion(
    run_id: str, model: str, version: str, variants: str, alias: str, stack: str, checkpoint: str | None = None
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
    names = [v.strip() for v in variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if not names or unknown:
        problems.append(
            Problem(
                "--variants",
                f"comma-separated, from {', '.join(VARIANTS)}"
                + (f" (not {', '.join(map(repr, unknown))})" if unknown else ""),
            )
        )
    elif len(set(names)) != len(names):
        problems.append(Problem("--variants", "each variant once"))
    if problems:
        raise InputError(problems)
    return Promotion(run_id, model, version, tuple(names), alias, stack, checkpoint)


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
