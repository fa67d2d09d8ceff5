"""`python -m infra diagram`: a picture of stacks, their components and the registry bridge (registered in
infra.cli)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_diagram_parser(verbs: argparse._SubParsersAction) -> None:
    diagram = verbs.add_parser("diagram", help="draw stacks, their components and the registry bridge (Graphviz)")
    diagram.add_argument(
        "--stack",
        "-s",
        action="append",
        default=[],
        metavar="S",
        help="a stack to draw, with the stacks it references (repeatable); "
        "default: the demo stacks registry, training-demo, serving-demo",
    )
    diagram.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="FILE",
        help="FILE.svg or FILE.png (needs Graphviz's dot), or FILE.dot",
    )
    diagram.set_defaults(handler=run_diagram)


def stacks_with_references(stacks: list[str]):
    """Offline previews of `stacks` and of every stack they reference, each once, in a stable order."""
    from infra.core.project import load_project
    from infra.tools.offline.engine import Preview, preview

    project = load_project()
    previews, pending, seen = [], list(stacks), set()
    done: dict[str, Preview] = {}
    while pending:
        stack = pending.pop(0)
        if stack in seen:
            continue
        seen.add(stack)
        # A referenced stack was previewed to resolve its reference: that preview is the one to draw.
        result = done[stack] if stack in done else preview(stack, project=project)
        done.update(result.referenced)
        previews.append(result)
        pending += [
            s.inputs.get("name", s.name).rsplit("/", 1)[-1]
            for s in result.steps
            if s.type == "pulumi:pulumi:StackReference"
        ]
    return previews


def caption(result) -> str:
    """The stack's hourly cost at catalog prices, for its cluster's label."""
    from infra.kinds import load
    from infra.tools import preview_json
    from infra.tools.cost.estimate import estimate
    from infra.tools.cost.render import usd
    from infra.tools.offline.digest import to_digest

    cost = estimate(preview_json.parse(to_digest(result)), load(result.config))
    low, high = cost.hourly_low, cost.hourly_high
    figure = usd(high) if low == high else f"{usd(low)}-{usd(high)}"
    usage = " + usage" if cost.of("usage") else ""
    return f"{'at least ' if not cost.complete else ''}{figure}/h{usage} at list prices"


def run_diagram(args: argparse.Namespace) -> int:
    import sys

    from infra.tools.diagram.dot import to_dot, write
    from infra.tools.diagram.graph import DEMO_STACKS, build

    previews = stacks_with_references(args.stack or list(DEMO_STACKS))
    failed = [p for p in previews if p.errors]
    for p in failed:
        for diagnostic in p.errors:
            print(f"preview error: {p.stack}: {diagnostic.message}", file=sys.stderr)
    graph = build(previews, {p.stack: caption(p) for p in previews if not p.errors})
    write(to_dot(graph, f"mlinfra: {', '.join(p.stack for p in previews)} (offline previews)"), args.out)
    print(f"wrote {args.out}")
    return 1 if failed else 0
