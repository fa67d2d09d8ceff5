"""The offline preview for people: a tree of resources grouped by component, with counts."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

from infra.tools.offline.engine import Preview
from infra.tools.offline.recording import Registration

SYMBOL = {"create": "+", "read": ">"}


def render(preview: Preview) -> str:
    children: dict[str, list[Registration]] = defaultdict(list)
    for step in preview.steps:
        children[step.parent].append(step)
    roots = children.get("", [])
    rows: list[tuple[str, str, str]] = []
    for root in roots:
        _walk(root, children, "", True, rows, top=True)
    width = max((len(r[1]) for r in rows), default=20) + 2
    lines = [
        f"Previewing {preview.project}/{preview.stack} offline (no credentials, no cloud)",
        "",
        f"     {'Type':<{width}}Name",
    ]
    for symbol, tree_type, rest in rows:
        lines.append(f" {symbol}   {tree_type:<{width}}{rest}")
    if preview.outputs:
        lines += ["", "Outputs:"] + [f"    {k}: {_short(v)}" for k, v in preview.outputs.items()]
    counts = Counter(s.op for s in preview.steps)
    summary = ", ".join(f"{SYMBOL.get(op, op)} {n} to {op}" for op, n in sorted(counts.items()))
    lines += ["", "Resources:", f"    {summary}  ({len(preview.steps)} including the stack)"]
    notes = [d for d in preview.diagnostics if d.severity != "error"]
    errors = preview.errors
    if notes:
        lines += ["", "Notes:"] + [f"    {d.severity}: {d.message}" for d in notes]
    if errors:
        lines += ["", f"Errors ({len(errors)}):"] + [
            f"    error: {d.message}" + (f"\n           at {d.urn}" if d.urn else "") for d in errors
        ]
    lines.append(f"\nDuration: {preview.duration_s:.2f}s")
    return "\n".join(lines)


def _walk(
    step: Registration,
    children: dict[str, list[Registration]],
    indent: str,
    last: bool,
    rows: list[tuple[str, str, str]],
    top: bool = False,
) -> None:
    kids = children.get(step.urn, [])
    branch = "" if top else ("└─ " if last else "├─ ")
    info = []
    if not step.custom and kids and step.type != "pulumi:pulumi:Stack":
        info.append(f"{_descendants(step, children)} resources")
    if step.protect:
        info.append("protect")
    if step.retain_on_delete:
        info.append("retainOnDelete")
    rows.append((SYMBOL.get(step.op, "?"), f"{indent}{branch}{step.type}", f"{step.name}  {', '.join(info)}".rstrip()))
    child_indent = indent if top else indent + ("   " if last else "│  ")
    for i, kid in enumerate(kids):
        _walk(kid, children, child_indent, i == len(kids) - 1, rows)


def _descendants(step: Registration, children: dict[str, list[Registration]]) -> int:
    return sum(1 + _descendants(k, children) for k in children.get(step.urn, []))


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 100 else text[:97] + "..."
