"""The pull-request report: golden markdown per demo stack, built from the same preview, policy run and
cost as the other verbs.

The golden files pin the report byte for byte, except times (a training preview without a fixed
`lifecycle.expiresAt` shows a provisional one, now + ttlHours, which a policy message may quote). After an
intended change (a new resource, policy or price), rewrite them and review the diff:

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/infra/tools/test_report.py
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from infra.cli import main
from infra.tools.diagram.graph import DEMO_STACKS
from infra.tools.report import MARKER

GOLDEN = Path(__file__).parent / "golden"
TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?Z?")


def report(capsys, *args: str) -> tuple[int, str]:
    code = main(["report", *args])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("stack", DEMO_STACKS)
def test_report_matches_golden(capsys, stack):
    code, text = report(capsys, "--stack", stack, "--markdown")
    stable = TIME.sub("<time>", text)
    golden = GOLDEN / f"report_{stack}.md"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(stable, encoding="utf-8")
    assert stable == golden.read_text(encoding="utf-8"), f"report of {stack} changed; review, then UPDATE_GOLDEN=1"
    failed = "❌" in text.splitlines()[3]
    assert code == (1 if failed else 0)


def test_report_is_stable_run_to_run(capsys):
    first = report(capsys, "--stack", "registry")[1]
    assert report(capsys, "--stack", "registry")[1] == first
    assert not re.search(r"\d+\.\d+ ?s\b|Duration", first)


def test_one_comment_for_several_stacks(capsys):
    code, text = report(capsys, "--stack", "registry", "--stack", "serving-demo")
    assert text.startswith(MARKER) and text.count(MARKER) == 1
    assert "### `registry` (registry)" in text and "### `serving-demo` (serving)" in text
    assert "#### Policy" in text and "#### Cost" in text and "Monthly (730 h)" in text


def test_report_reuses_the_policy_runner_results(capsys):
    from infra.tools import preview_json
    from infra.tools.offline.digest import to_digest
    from infra.tools.offline.engine import preview
    from infra.tools.policy_runner import runner

    run = runner.run(preview_json.parse(to_digest(preview("serving-demo"))))
    text = report(capsys, "--stack", "serving-demo")[1]
    advisory = sum(1 for v in run.violations if v.enforcement == "advisory")
    assert (
        f"{len(run.pack.policies)} policies over {run.resources} resources: the check "
        f"{'fails' if run.mandatory else 'passes'} ({len(run.mandatory)} mandatory, {advisory} advisory"
    ) in text


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--stack", "registry", "--stack", "serving-demo", "-c", "aws:region=us-east-2"],
            "error: -c: overrides apply to one stack; give one --stack with -c",
        ),
        (["--stack", "nope"], "error: --stack: unknown stack 'nope'"),
        (["--stack", "training-demo", "--hours", "0"], "error: --hours: '0' is not a positive number of hours"),
    ],
)
def test_bad_input_exits_2(capsys, args, message):
    assert main(["report", *args]) == 2
    assert capsys.readouterr().err.startswith(message)


def test_serving_reports_carry_the_twins_headline_figures(capsys):
    text = report(capsys, "--stack", "serving-demo", "--stack", "registry")[1]
    section = text.split("#### Simulation", 1)[1]
    assert "| `llama-3-8b-neuron` |" in section and "| `mistral-7b` |" in section
    assert text.count("#### Simulation") == 1  # the registry has none


def test_a_gke_serving_stack_is_simulated_on_its_node_pools(capsys):
    text = report(capsys, "--stack", "serving-gcp-demo")[1]
    assert "| `llama-3-8b-l4` |" in text.split("#### Simulation", 1)[1]
