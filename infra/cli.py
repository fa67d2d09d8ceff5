"""`python -m infra <verb>`: the offline preview and project tools.

Exit codes (docs/architecture.md, "Contracts"): 0 ok; 1 the check found problems, or the cloud failed; 2 bad
input (one line per problem).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from infra.core.errors import InputError, Problem


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except InputError as error:
        for problem in error.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        from infra.ops.runtime import cloud_error

        if (cloud := cloud_error(error)) is not None:  # the cloud failed (throttling, credentials, network): exit 1
            print(f"error: {cloud}", file=sys.stderr)
            return 1
        if os.environ.get("MLINFRA_DEBUG"):
            raise
        print(
            f"internal error: {type(error).__name__}: {error} (set MLINFRA_DEBUG=1 for the traceback)", file=sys.stderr
        )
        return 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m infra", description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    preview = verbs.add_parser("preview", help="preview stacks offline, with no credentials and no cloud")
    target = preview.add_mutually_exclusive_group(required=True)
    target.add_argument("--stack", "-s", help="stack name: stacks/Pulumi.<stack>.yaml")
    target.add_argument("--all", action="store_true", help="every stack in stacks/")
    preview.add_argument(
        "-c",
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value, path syntax of `pulumi config set --path` (repeatable)",
    )
    preview.add_argument("--json", action="store_true", help="print a `pulumi preview --json` shaped document")
    preview.set_defaults(handler=_preview)

    schema = verbs.add_parser("schema", help="write the JSON schema of stack files (for editors)")
    schema.add_argument("--out", type=Path, help="file to write; default: standard output")
    schema.set_defaults(handler=_schema)

    catalog = verbs.add_parser("catalog", help="show the instance catalog's facts for instance types")
    catalog.add_argument("types", nargs="*", help="instance types; default: the training and serving types")
    catalog.set_defaults(handler=_catalog)

    from infra.tools.policy_runner.cli import add_policy_parser

    add_policy_parser(verbs)
    from infra.tools.cost.cli import add_cost_parser

    add_cost_parser(verbs)
    from infra.tools.diagram.cli import add_diagram_parser

    add_diagram_parser(verbs)
    from infra.tools.docs import add_docs_parser

    add_docs_parser(verbs)
    from infra.tools.size_cli import add_size_parser

    add_size_parser(verbs)
    from infra.tools.simulate.cli import add_simulate_parser

    add_simulate_parser(verbs)
    from infra.tools.report import add_report_parser

    add_report_parser(verbs)
    from infra.ops.lifecycle.cli import add_lifecycle_parsers

    add_lifecycle_parsers(verbs)
    from infra.ops.promotion.cli import add_promotion_parsers

    add_promotion_parsers(verbs)
    from infra.ops.smoke import add_smoke_parser

    add_smoke_parser(verbs)
    # No prefix matching: `--out` must not pass for `simulate --output-tokens`, nor a typo for a neighbour.
    parser.allow_abbrev = False
    for verb in verbs.choices.values():
        verb.allow_abbrev = False
    return parser


def _preview(args: argparse.Namespace) -> int:
    from infra.core.paths import parse_override
    from infra.core.project import load_project
    from infra.tools.offline.digest import to_digest
    from infra.tools.offline.engine import preview
    from infra.tools.offline.render import render

    overrides = [parse_override(text) for text in args.config]
    project = load_project()
    stacks = project.stacks() if args.all else [args.stack]
    if args.all and overrides:
        raise InputError(Problem("-c", "overrides apply to one stack; use --stack with -c"))
    # Validate every stack's config before running any, so bad input creates nothing and prints no half output.
    previews = [preview(stack, overrides, project) for stack in stacks]
    if args.json:
        documents = [to_digest(p) for p in previews]
        print(json.dumps(documents[0] if len(documents) == 1 else documents, indent=2, default=str))
    else:
        print("\n\n".join(render(p) for p in previews))
    return 1 if any(p.errors for p in previews) else 0


def _schema(args: argparse.Namespace) -> int:
    from infra.tools.stack_schema import stack_file_schema

    text = json.dumps(stack_file_schema(), indent=2) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def _catalog(args: argparse.Namespace) -> int:
    from infra.catalog.aws import instance_table_source, instance_type, on_demand_price, price_table_source
    from infra.catalog.gcp import known_machine_types
    from infra.catalog.gcp.table import gcp_table

    gcp_names = [n for n in args.types if n in known_machine_types()] if args.types else list(known_machine_types())
    names = (
        [n for n in args.types if n not in gcp_names]
        if args.types
        else [
            "p4d.24xlarge",
            "p4de.24xlarge",
            "p5.48xlarge",
            "p5e.48xlarge",
            "p5en.48xlarge",
            "trn1.32xlarge",
            "trn1n.32xlarge",
            "trn2.48xlarge",
            "inf2.xlarge",
            "inf2.48xlarge",
            "g5.xlarge",
            "g5.12xlarge",
            "g5.48xlarge",
        ]
    )
    problems = []
    rows = []
    for name in names:
        try:
            it = instance_type(name)
        except LookupError as error:
            problems.append(Problem("types", str(error)))
            continue
        price = on_demand_price(name)
        rows.append(
            (
                name,
                f"{it.accelerator_count}x {it.accelerator_model or '-'}",
                str(len(it.network_cards)),
                str(it.max_efa_interfaces if it.efa_supported else 0),
                f"{it.total_bandwidth_gbps:g}",
                "no public price" if price is None else f"{price:.3f}",
            )
        )
    if problems:
        raise InputError(problems)
    if not rows:
        print("\n".join(gcp_table(gcp_names)))
        return 0
    header = ("type", "accelerators", "cards", "max EFA", "Gbps", "$/h")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
    print(f"\ninstances: {' / '.join(instance_table_source())}\nprices: {' / '.join(price_table_source())}")
    if gcp_names:
        print("\n" + "\n".join(gcp_table(gcp_names)))
    return 0
