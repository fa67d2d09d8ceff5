"""`python -m infra report`: one pull-request comment per change, in markdown: the offline preview's
summary, the policy pack's results (infra.tools.policy_runner.runner), the cost (infra.tools.cost) and, for a
serving stack, the twin's headline figures (infra.tools.simulate.report). Stable output: no
timestamps or durations, so a golden file pins it and the sticky PR comment only changes with the code.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Any

MARKER = "<!-- mlinfra-report -->"
OFFLINE_LIMITS = (
    "Offline preview: inputs as the program declared them (no provider defaults), placeholder "
    "computed outputs, no cloud-side checks. Costs at list prices, before discounts and usage."
)


@dataclass(frozen=True)
class StackReport:
    preview: Any  # infra.tools.offline.engine.Preview
    policy: Any  # infra.tools.policy_runner.runner.PolicyRun
    cost: Any  # infra.tools.cost.model.StackCost
    simulation: list[str] | None = None  # the twin's headline lines, serving stacks only
    front_door: list[str] | None = None  # the endpoint, its TLS and auth, serving stacks only
    slo_misses: tuple[tuple[str, float], ...] = ()  # (model, share over its SLO or lost) in the twin's hour

    @property
    def failed(self) -> bool:
        return bool(self.preview.errors or self.policy.mandatory)


def add_report_parser(verbs: argparse._SubParsersAction) -> None:
    report = verbs.add_parser("report", help="pull-request comment: preview summary, policy results and cost")
    report.add_argument(
        "--stack",
        "-s",
        action="append",
        required=True,
        metavar="S",
        help="stack to report on (repeatable: one comment with a section per stack)",
    )
    report.add_argument(
        "-c",
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value of the (one) reported stack, as `preview -c` (repeatable)",
    )
    report.add_argument("--hours", metavar="H", help="as for `cost --hours`")
    report.add_argument(
        "--policy-config",
        action="append",
        default=[],
        metavar="POLICY.PROPERTY=VALUE",
        help="pack config value, as for `policy --policy-config`",
    )
    report.add_argument(
        "--markdown",
        action="store_true",
        default=True,
        help="markdown for a pull-request comment (the only format, and the default)",
    )
    report.set_defaults(handler=run_report)


def build(
    stack: str, overrides: list[tuple[str, str]], hours: float | None, policy_config: tuple[dict, ...] = ()
) -> StackReport:
    from infra.kinds import load
    from infra.tools import preview_json
    from infra.tools.cost.estimate import estimate
    from infra.tools.offline.digest import to_digest
    from infra.tools.offline.engine import preview
    from infra.tools.policy_runner import runner
    from infra.tools.simulate.report import for_report

    result = preview(stack, overrides)
    document = preview_json.parse(to_digest(result), f"offline preview of {stack}")
    cost = estimate(document, load(result.config), hours)
    from infra.tools.front_door_report import lines as front_door_lines

    serving = cost.kind == "serving" and not result.errors
    simulation, missed = for_report(document) if serving else (None, [])
    door = front_door_lines(document) if serving else None
    return StackReport(result, runner.run(document, policy_config), cost, simulation, door, tuple(missed))


def markdown(reports: list[StackReport]) -> str:
    failed = [r.preview.stack for r in reports if r.failed]
    missed = [
        f"`{model}` in `{r.preview.stack}` ({share:.1%} of requests over it or lost)"
        for r in reports
        for model, share in r.slo_misses
    ]
    if failed:
        verdict = f"❌ problems in {', '.join(f'`{s}`' for s in failed)}"
    elif missed:
        verdict = (
            "⚠️ every stack previews and passes the mandatory policies, but the twin's hour shows models missing "
            f"their SLO: {', '.join(missed)}; see Simulation"
        )
    else:
        verdict = "✅ every stack previews and passes the mandatory policies"
    out = [MARKER, "## mlinfra: offline preview, policy check and cost", "", verdict]
    for report in reports:
        out += ["", *_section(report)]
    out += ["", f"<sub>{OFFLINE_LIMITS}</sub>"]
    return "\n".join(out) + "\n"


def _section(r: StackReport) -> list[str]:
    from infra.tools.cost.render import markdown as cost_markdown

    p = r.preview
    return [
        f"### `{p.stack}` ({r.cost.kind})",
        "",
        *_preview(p),
        "",
        *_policy(r.policy),
        *(["", *r.front_door] if r.front_door else []),
        "",
        "#### Cost",
        "",
        cost_markdown(r.cost),
        *(["", *r.simulation] if r.simulation else []),
    ]


def _preview(p: Any) -> list[str]:
    steps = [s for s in p.steps if s.type != "pulumi:pulumi:Stack"]
    ops = Counter(s.op for s in steps)
    severities = Counter(d.severity for d in p.diagnostics)
    out = [
        "#### Preview",
        "",
        f"{', '.join(f'{n} to {op}' for op, n in sorted(ops.items()))}; {severities['error']} error(s), "
        f"{severities['warning']} warning(s), {severities['info']} note(s).",
        "",
    ]
    problems = [d for d in p.diagnostics if d.severity in ("error", "warning")]
    out += [f"- **{d.severity}**: {_md(d.message)}" for d in problems] + ([""] if problems else [])
    by_type = Counter((s.type, s.op) for s in steps)
    op_names = sorted(ops)
    out += [
        "<details><summary>Resources by type</summary>",
        "",
        "| type | " + " | ".join(op_names) + " |",
        "|---|" + "---:|" * len(op_names),
    ]
    for type_ in sorted({t for t, _ in by_type}):
        out.append(f"| `{type_}` | " + " | ".join(str(by_type.get((type_, op), "")) for op in op_names) + " |")
    return out + ["", "</details>"]


def _policy(run: Any) -> list[str]:
    mandatory = len(run.mandatory)
    advisory = sum(1 for v in run.violations if v.enforcement == "advisory")
    status = "fails" if mandatory else "passes"
    out = [
        "#### Policy",
        "",
        f"Pack `{run.pack.name}` {run.pack.version}, {len(run.pack.policies)} policies over {run.resources} "
        f"resources: the check {status} ({mandatory} mandatory, {advisory} advisory violation(s)).",
    ]
    if run.violations:
        out += ["", "| enforcement | policy | resource | message |", "|---|---|---|---|"]
        for v in run.violations:
            where = f"`{v.urn.rsplit('::', 1)[-1]}`" if v.urn else "stack"
            out.append(f"| {v.enforcement} | `{v.policy}` | {where} | {_md(v.message)} |")
    return out


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def run_report(args: argparse.Namespace) -> int:
    from infra.core.errors import InputError, Problem
    from infra.core.paths import parse_override
    from infra.tools.cost.cli import parse_hours
    from infra.tools.policy_runner import pack_config

    hours = parse_hours(args.hours)
    overrides = [parse_override(text) for text in args.config]
    if overrides and len(set(args.stack)) > 1:
        raise InputError(Problem("-c", "overrides apply to one stack; give one --stack with -c"))
    user_config = (pack_config.parse_assignments(args.policy_config),)
    # Every stack's input is checked (by its preview) before anything is printed.
    reports = [build(stack, overrides, hours, user_config) for stack in dict.fromkeys(args.stack)]
    sys.stdout.write(markdown(reports))
    return 1 if any(r.failed for r in reports) else 0
