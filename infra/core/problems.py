"""Turn pydantic validation errors into one line per problem naming the config key path."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from infra.core.errors import Problem


def key_path(namespace: str, loc: tuple[Any, ...]) -> str:
    path = f"{namespace}:"
    for i, part in enumerate(loc):
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if i else "") + str(part)
    return path


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class that holds the value at `loc` (by alias), if loc walks through models only."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = next((f for n, f in current.model_fields.items() if (f.alias or n) == part), None)
        if field is None:
            return None
        current = _inner_model(field.annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _inner_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def allowed_keys(model: type[BaseModel]) -> list[str]:
    return sorted(f.alias or n for n, f in model.model_fields.items())


def problems_from(error: ValidationError, model: type[BaseModel], namespace: str) -> list[Problem]:
    problems = []
    for err in error.errors():
        loc = tuple(err["loc"])
        problems.append(Problem(key_path(namespace, loc), _message(err, model, loc)))
    return problems


def _message(err: Mapping[str, Any], model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        parent = _model_at(model, loc[:-1])
        allowed = allowed_keys(parent) if parent else []
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        return f"unknown key{hint}; allowed: {', '.join(allowed)}" if allowed else "unknown key"
    if kind == "missing":
        holder = _model_at(model, loc[:-1])
        field = next((f for n, f in (holder.model_fields.items() if holder else []) if (f.alias or n) == loc[-1]), None)
        return f"required: {field.description}" if field and field.description else "required"
    message = err["msg"].removeprefix("Value error, ")
    if kind == "literal_error":
        message = "must be one of " + err["ctx"]["expected"].replace(" or ", ", ")
    bounds = {
        "greater_than_equal": ("at least", "ge"),
        "less_than_equal": ("at most", "le"),
        "greater_than": ("more than", "gt"),
        "less_than": ("less than", "lt"),
    }
    if kind in bounds:
        words, ctx_key = bounds[kind]
        message = f"must be {words} {err['ctx'][ctx_key]}"
    if "input" in err and not isinstance(err["input"], (dict, list)):
        shown = repr(err["input"])
        message += f" (got {shown if len(shown) <= 80 else shown[:60] + f'... ({len(shown):,} characters)'})"
    return message
