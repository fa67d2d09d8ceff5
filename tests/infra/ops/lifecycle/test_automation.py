"""The Automation API adapter, judged by the CLI operations it issues to a fake `pulumi` executable.

The fake records its argv and working directory, answers what the Automation API parses (version,
`stack ls --json`, `config --json`, `stack output --json`, `stack history --json`) and fails on cue,
so the real `pulumi.automation` code runs end to end with no Pulumi CLI and no cloud.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from infra.core.project import ROOT
from infra.ops.automation import AutomationStacks, structured
from infra.ops.lifecycle.ports import StackOpsError
from infra.ops.lifecycle.teardown import transient_destroy_failure
from tests.infra.ops.lifecycle.recording import DEPENDENCY_VIOLATION, deployed_outputs, training_config

STACK = "training-demo"
EXPIRES_AT = "mlinfra:training.lifecycle.expiresAt"

FAKE_PULUMI = r"""#!{python}
import json, os, sys
here = {here!r}
args = sys.argv[1:]
with open(os.path.join(here, "calls.jsonl"), "a") as log:
    log.write(json.dumps({{"argv": args, "cwd": os.getcwd(),
                          "automation": os.environ.get("PULUMI_AUTOMATION_API")}}) + "\n")
state = json.load(open(os.path.join(here, "state.json")))
a = [x for x in args if x != "--non-interactive"]
stack = a[a.index("--stack") + 1] if "--stack" in a else None

def out(value):
    print(json.dumps(value))

def save():
    json.dump(state, open(os.path.join(here, "state.json"), "w"))

if a == ["version"]:
    print("v3.272.0")
elif a[:3] == ["stack", "ls", "--json"]:
    out([{{"name": name, "current": False}} for name in state["stacks"]])
elif a[:2] == ["stack", "select"]:
    if stack not in [name.rsplit("/", 1)[-1] for name in state["stacks"]]:
        sys.stderr.write("error: no stack named '%s' found\n" % stack)
        sys.exit(255)
elif a[:2] == ["stack", "init"]:
    state["stacks"].append(a[2]); save()
elif a[:2] == ["stack", "output"]:
    out(state["outputs"])
elif a[:2] == ["stack", "history"]:
    out([{{"kind": "update", "startTime": "2026-03-01T10:00:00.000Z", "message": "", "environment": {{}},
           "config": {{}}, "result": "succeeded", "endTime": "2026-03-01T10:20:00.000Z"}}])
elif a[:2] == ["stack", "rm"]:
    pass
elif a[:2] == ["config", "set"]:
    pass
elif a[:1] == ["config"]:
    out({{key: {{"value": value if isinstance(value, str) else json.dumps(value), "secret": False}}
         for key, value in state["config"].items()}})
elif a[:1] == ["up"]:
    print("Updating (%s):" % stack)
    print("Resources: 45 created")
elif a[:1] == ["destroy"]:
    if state["destroy_failures"]:
        print("Destroying (%s):" % stack)
        print(state["destroy_failures"].pop(0)); save()
        sys.stderr.write("error: update failed\n")
        sys.exit(255)
    print("Resources: 45 deleted")
else:
    sys.stderr.write("fake pulumi: unexpected %r\n" % (args,))
    sys.exit(2)
"""


@pytest.fixture
def fake(tmp_path: Path):
    (tmp_path / "bin").mkdir()
    script = tmp_path / "bin" / "pulumi"
    script.write_text(FAKE_PULUMI.format(python=sys.executable, here=str(tmp_path)), encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    state = {
        "stacks": ["registry", "organization/mlinfra/training-demo"],
        "config": training_config(),
        "outputs": deployed_outputs(),
        "destroy_failures": [],
    }
    (tmp_path / "state.json").write_text(json.dumps(state), encoding="utf-8")

    def calls() -> list[list[str]]:
        lines = (tmp_path / "calls.jsonl").read_text(encoding="utf-8").splitlines()
        return [json.loads(line)["argv"] for line in lines]

    def fail_destroy(output: str) -> None:
        state["destroy_failures"].append(output)
        (tmp_path / "state.json").write_text(json.dumps(state), encoding="utf-8")

    stacks = AutomationStacks(project_dir=ROOT, pulumi_root=str(tmp_path))
    return stacks, calls, fail_destroy, tmp_path


def test_the_workspace_is_built_on_first_use_with_a_version_check(fake):
    stacks, calls, _, tmp_path = fake
    assert not (tmp_path / "calls.jsonl").exists()
    assert stacks.list_stacks() == ["registry", STACK]
    assert calls() == [["version"], ["--non-interactive", "stack", "ls", "--json"]]
    first = json.loads((tmp_path / "calls.jsonl").read_text(encoding="utf-8").splitlines()[1])
    assert first["cwd"] == str(ROOT) and first["automation"] == "true"


def test_exists_lists_the_stacks(fake):
    stacks, calls, _, _ = fake
    assert stacks.exists(STACK) and not stacks.exists("training-other")


def test_config_is_read_whole_and_structured_values_come_back_as_objects(fake):
    stacks, calls, _, _ = fake
    config = stacks.config(STACK)
    assert config == training_config()
    assert calls()[1:] == [["--non-interactive", "config", "--show-secrets", "--json", "--stack", STACK]]


def test_set_config_selects_the_stack_and_sets_one_path(fake):
    stacks, calls, _, _ = fake
    stacks.set_config(STACK, EXPIRES_AT, "2026-03-02T10:00:00Z")
    assert calls()[1:] == [
        ["--non-interactive", "stack", "select", "--stack", STACK],
        [
            "config",
            "set",
            "--path",
            EXPIRES_AT,
            "--plaintext",
            "--stack",
            STACK,
            "--non-interactive",
            "--",
            "2026-03-02T10:00:00Z",
        ],
    ]


def test_set_config_on_a_stack_known_only_by_its_file_creates_it_first(fake):
    stacks, calls, _, _ = fake
    stacks.set_config("training-next", EXPIRES_AT, "2026-03-02T10:00:00Z")
    assert [argv[:3] for argv in calls()[1:]] == [
        ["--non-interactive", "stack", "select"],
        ["--non-interactive", "stack", "init"],
        ["config", "set", "--path"],
    ]
    assert calls()[2] == ["--non-interactive", "stack", "init", "training-next"]


def test_up_runs_the_local_program_and_streams_its_output(fake):
    stacks, calls, _, _ = fake
    lines: list[str] = []
    stacks.up(STACK, lines.append)
    assert calls()[1:3] == [
        ["--non-interactive", "stack", "select", "--stack", STACK],
        [
            "--non-interactive",
            "up",
            "--yes",
            "--skip-preview",
            "--color",
            "never",
            "--exec-kind",
            "auto.local",
            "--stack",
            STACK,
        ],
    ]
    assert [argv[1:3] for argv in calls()[3:]] == [["stack", "output"], ["stack", "output"], ["stack", "history"]]
    assert lines == [f"Updating ({STACK}):", "Resources: 45 created"]


def test_destroy_refreshes_first_goes_on_past_errors_and_remove_keeps_the_stack_file(fake):
    stacks, calls, _, _ = fake
    stacks.destroy(STACK, lambda line: None)
    stacks.remove(STACK)
    issued = calls()
    # --refresh: what the guard already deleted leaves the state first; --continue-on-error: one security
    # group's DependencyViolation does not stop the deletion of everything else
    assert [
        "--non-interactive",
        "destroy",
        "--skip-preview",
        "--yes",
        "--color",
        "never",
        "--continue-on-error",
        "--refresh",
        "--exec-kind",
        "auto.local",
        "--stack",
        STACK,
    ] in issued
    assert issued[-1] == ["--non-interactive", "stack", "rm", "--yes", "--preserve-config", STACK]


def test_a_failed_destroy_carries_the_engine_output_for_classification(fake):
    stacks, calls, fail_destroy, _ = fake
    fail_destroy(DEPENDENCY_VIOLATION)
    lines: list[str] = []
    with pytest.raises(StackOpsError) as error:
        stacks.destroy(STACK, lines.append)
    assert error.value.operation == "destroy" and error.value.stack == STACK
    assert DEPENDENCY_VIOLATION in error.value.output
    assert transient_destroy_failure(error.value.output).startswith("DependencyViolation")
    assert DEPENDENCY_VIOLATION in lines and "error: update failed" in lines


def test_outputs_are_plain_values(fake):
    stacks, calls, _, _ = fake
    assert stacks.outputs(STACK) == deployed_outputs()
    assert calls()[1:] == [
        ["--non-interactive", "stack", "output", "--json", "--stack", STACK],
        ["--non-interactive", "stack", "output", "--json", "--show-secrets", "--stack", STACK],
    ]


def test_an_unknown_stack_is_a_stack_ops_error(fake):
    stacks, _, _, _ = fake
    with pytest.raises(StackOpsError) as error:
        stacks.destroy("training-gone", lambda line: None)
    assert "no stack named 'training-gone' found" in error.value.output


def test_no_pulumi_cli_is_one_clear_error(tmp_path):
    stacks = AutomationStacks(project_dir=ROOT, pulumi_root=str(tmp_path / "nowhere"))
    with pytest.raises(StackOpsError) as error:
        stacks.list_stacks()
    assert str(error.value).startswith("the pulumi CLI was not found; install it")


@pytest.mark.parametrize(
    "value, parsed",
    [
        ('{"runId": "r"}', {"runId": "r"}),
        ("[1, 2]", [1, 2]),
        ("training", "training"),
        ("{not json", "{not json"),
    ],
)
def test_structured_values_are_parsed(value, parsed):
    assert structured(value) == parsed
