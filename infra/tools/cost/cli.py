"""`python -m infra cost`: what a stack costs, from its offline preview (registered in infra.cli)."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable

from infra.core.errors import InputError, Problem


def add_cost_parser(verbs: argparse._SubParsersAction) -> None:
    cost = verbs.add_parser("cost", help="hourly, run and monthly cost of a stack at catalog prices")
    cost.add_argument("--stack", "-s", required=True, help="stack name: stacks/Pulumi.<stack>.yaml")
    cost.add_argument(
        "-c",
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, as `preview -c` (repeatable)",
    )
    cost.add_argument(
        "--hours",
        metavar="H",
        help="training: length of the run (default: lifecycle.ttlHours); other kinds: a period to cost",
    )
    cost.add_argument("--json", action="store_true", help="print the cost as JSON")
    cost.set_defaults(handler=run_cost)


MAX_HOURS = 87_600  # ten years: beyond it the figures overflow long before they mean anything


def parse_hours(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        hours = float(text)
    except ValueError:
        hours = math.nan
    if not math.isfinite(hours) or hours <= 0:
        raise InputError(Problem("--hours", f"{text!r} is not a positive number of hours"))
    if hours > MAX_HOURS:
        raise InputError(
            Problem("--hours", f"{text!r} is more than {MAX_HOURS:,} hours (ten years); price a shorter run")
        )
    return hours


def stack_cost(stack: str, overrides: Iterable[tuple[str, str]] = (), hours: float | None = None):
    """(offline preview, its cost) of `stack`; bad config or an unknown stack raises InputError."""
    from infra.kinds import load
    from infra.tools import preview_json
    from infra.tools.cost.estimate import estimate
    from infra.tools.offline.digest import to_digest
    from infra.tools.offline.engine import preview

    result = preview(stack, list(overrides))
    document = preview_json.parse(to_digest(result), f"offline preview of {stack}")
    return result, estimate(document, load(result.config), hours)


def run_cost(args: argparse.Namespace) -> int:
    import sys

    from infra.core.paths import parse_override
    from infra.tools.cost.render import render, to_json

    hours = parse_hours(args.hours)
    result, cost = stack_cost(args.stack, [parse_override(text) for text in args.config], hours)
    for diagnostic in result.errors:
        print(f"preview error: {diagnostic.message}", file=sys.stderr)
    print(json.dumps(to_json(cost), indent=2) if args.json else render(cost))
    return 1 if result.errors else 0
