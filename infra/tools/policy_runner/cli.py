"""`python -m infra policy`: the offline policy check (registered in infra.cli)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infra.tools.policy_runner.runner import PolicyRun


def add_policy_parser(verbs: argparse._SubParsersAction) -> None:
    policy = verbs.add_parser(
        "policy", help="run the CrossGuard pack in policies/ over an offline preview or a saved preview JSON"
    )
    target = policy.add_mutually_exclusive_group(required=True)
    target.add_argument("--stack", "-s", help="preview this stack offline, then check it")
    target.add_argument(
        "--preview-json",
        type=Path,
        metavar="FILE",
        help="check a saved `pulumi preview --json` (or `python -m infra preview --json`) document",
    )
    policy.add_argument(
        "-c",
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="with --stack: override a stack config value, as `preview -c` (repeatable)",
    )
    policy.add_argument(
        "--policy-pack-config",
        type=Path,
        metavar="FILE",
        help="pack config JSON, as for `pulumi preview --policy-pack-config`",
    )
    policy.add_argument(
        "--policy-config",
        action="append",
        default=[],
        metavar="POLICY.PROPERTY=VALUE",
        help="set one pack config value, e.g. stack-hourly-cost-under-ceiling.maxHourlyCostUsd=500",
    )
    policy.add_argument("--json", action="store_true", help="print the violations as JSON")
    policy.set_defaults(handler=run_policy)


def run_policy(args: argparse.Namespace) -> int:
    from infra.core.errors import InputError, Problem
    from infra.tools.policy_runner import pack_config

    if args.preview_json and args.config:
        raise InputError(Problem("-c", "stack config overrides apply to --stack; a saved preview is checked as it is"))
    user_config = []
    if args.policy_pack_config:
        user_config.append(pack_config.read_file(args.policy_pack_config))
    user_config.append(pack_config.parse_assignments(args.policy_config))
    if args.stack is None:
        from infra.tools import preview_json
        from infra.tools.policy_runner import runner

        return _report(runner.run(preview_json.load(args.preview_json), tuple(user_config)), [], args.json)

    from infra.core.paths import parse_override
    from infra.core.project import load_project, stack_config
    from infra.tools.policy_runner.pack_process import start_early

    overrides = [parse_override(text) for text in args.config]
    project = load_project()
    # The pack boots (its own interpreter, SDK and rules) on another core while this one previews the stack. A
    # stack file that cannot be read is rejected before anything starts; config the preview rejects stops it.
    started = start_early(project.name, args.stack, stack_config(project, args.stack, overrides))
    try:
        from infra.tools import preview_json
        from infra.tools.offline.digest import to_digest
        from infra.tools.offline.engine import preview
        from infra.tools.policy_runner import runner

        result = preview(args.stack, overrides, project)
        preview_errors = [f"preview error: {d.message}" for d in result.errors]
        document = preview_json.parse(to_digest(result), f"offline preview of {args.stack}")
    except BaseException:
        if started is not None:
            started.stop()
        raise
    return _report(runner.run(document, tuple(user_config), started=started), preview_errors, args.json)


def _report(done: PolicyRun, preview_errors: list[str], as_json: bool) -> int:
    from infra.tools.policy_runner import report

    for line in preview_errors:
        print(line, file=sys.stderr)
    print(json.dumps(report.to_json(done), indent=2) if as_json else report.render(done))
    return 1 if done.mandatory or preview_errors else 0
