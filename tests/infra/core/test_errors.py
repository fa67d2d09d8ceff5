"""A problem is one line whatever the value it quotes: line breaks and control characters are written as their
escapes, so a bad value cannot end the line, forge another `error:` line or send a terminal control sequence."""

from __future__ import annotations

import pytest

from infra.core.errors import InputError, Problem
from tests.helpers import run_cli


@pytest.mark.parametrize(
    "value, shown",
    [
        ("a\nerror: forged", "a\\nerror: forged"),
        ("a\r\nb", "a\\r\\nb"),
        ("tab\there", "tab\\there"),
        ("nul\x00bell\x07esc\x1b[31m", "nul\\x00bell\\x07esc\\x1b[31m"),
        ("del\x7f", "del\\x7f"),
        ("nel\x85ls\u2028ps\u2029", "nel\\x85ls\\u2028ps\\u2029"),
        ("plain ümlaut and 'quotes'", "plain ümlaut and 'quotes'"),
    ],
)
def test_a_problem_renders_as_one_printable_line(value, shown):
    assert str(Problem("mlinfra:x", f"{value} is wrong")) == f"mlinfra:x: {shown} is wrong"
    assert str(InputError([Problem("", value), Problem("k", "v")])).splitlines() == [shown, "k: v"]


def test_a_newline_in_a_config_value_cannot_forge_an_error_line():
    done = run_cli(
        "preview", "--stack", "training-demo", "-c", "mlinfra:training.availabilityZone=us-east-1a\nerror: forged"
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: mlinfra:training.availabilityZone: us-east-1a\\nerror: forged does not offer p4d.24xlarge; AZs that "
        "do: us-east-1a, us-east-1b, us-east-1c, us-east-1d"
    ]
