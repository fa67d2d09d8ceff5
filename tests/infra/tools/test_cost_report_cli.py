"""`cost`, `diagram` and `report` as a user runs them: a subprocess, its exit code and output."""

import json

from tests.helpers import run_cli


def test_cost_json_in_a_subprocess():
    done = run_cli("cost", "--stack", "training-demo", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["kind"] == "training" and doc["hourly"]["totalUsd"] > 4 * 21.96


def test_bad_hours_is_one_line_and_exit_2():
    done = run_cli("cost", "--stack", "training-demo", "--hours", "0")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "error: --hours: '0' is not a positive number of hours\n"


def test_verbs_are_listed_in_help():
    done = run_cli("--help")
    assert done.returncode == 0 and all(verb in done.stdout for verb in ("cost", "diagram", "report"))
