"""The node bootstrap fits its cloud's limit whatever the job's command and env hold (within their bounds):
EC2 user data at most 16 KB raw (EC2 user guide, "Work with instance user data"; its base64 form at most 21,847
characters, so 16,383 bytes), here gzip-compressed; a Compute Engine metadata value at most 256 KiB. The worst
cases are rendered and measured: incompressible text, text that quoting multiplies, 4-byte UTF-8."""

from __future__ import annotations

import base64
import random
import string

import pytest

from infra.catalog.roles import types_for
from infra.cli import main
from infra.training.aws.userdata import USER_DATA_MAX_BYTES, render_user_data, user_data_base64, user_data_bytes
from infra.training.gcp.startup import STARTUP_SCRIPT_MAX_BYTES, render_startup_script
from infra.training.job_env import MAX_COMMAND_ARGS, MAX_COMMAND_BYTES, MAX_ENV_BYTES, MAX_ENV_VARS
from tests.infra.training.aws.bootstrap_sim import training_spec
from tests.infra.training.gcp.test_gcp_training import bootstrap as gcp_bootstrap

ALPHABETS = {
    "ascii": "".join(chr(c) for c in range(1, 128) if chr(c) != "@"),  # every 1-byte character a value may hold
    "printable": string.ascii_letters + string.digits + string.punctuation.replace("@", "") + " ",
    "quotes": "'",  # shlex turns every ' into '"'"': five bytes for one
    "utf8": "".join(chr(c) for c in range(0x1F600, 0x1F650)),  # 4 bytes each
}


def fill(alphabet: str, size: int, rng: random.Random) -> str:
    """Random text of at most `size` UTF-8 bytes from `alphabet`."""
    width = len(alphabet[0].encode())
    return "".join(rng.choice(alphabet) for _ in range(size // width))


def worst_job(alphabet: str, seed: int = 7) -> tuple[tuple[str, ...], dict[str, str]]:
    rng = random.Random(seed)
    command = ("/opt/job/train.py",) + tuple(
        fill(alphabet, (MAX_COMMAND_BYTES - len("/opt/job/train.py")) // (MAX_COMMAND_ARGS - 1), rng)
        for _ in range(MAX_COMMAND_ARGS - 1)
    )
    keys = [f"JOB_SETTING_{i:02d}" for i in range(MAX_ENV_VARS)]
    per_value = (MAX_ENV_BYTES - sum(len(k) + 1 for k in keys)) // MAX_ENV_VARS
    env = {k: fill(alphabet, per_value, rng) for k in keys}
    assert sum(len(a.encode()) for a in command) <= MAX_COMMAND_BYTES
    assert sum(len(f"{k}={v}".encode()) for k, v in env.items()) <= MAX_ENV_BYTES
    return command, env


LONGEST = dict(
    run_id="r" + "0123456789" * 3 + "abcdefgh9",  # 40 characters, the longest valid run id
    registry_bucket="b" * 63,
    registry_kms_key_id="arn:aws-us-gov:kms:us-gov-west-1:123456789012:key/mrk-" + "0" * 32,
    lustre_dns_name="fs-0123456789abcdef0.fsx.us-gov-west-1.amazonaws.com",
    registry_region="us-gov-west-1",
    torchrun="/" + "t" * 255,
)


@pytest.mark.parametrize("alphabet", sorted(ALPHABETS))
def test_the_worst_case_user_data_fits_ec2s_limit_on_every_training_type(alphabet, capsys):
    command, env = worst_job(ALPHABETS[alphabet])
    sizes = {}
    for name in types_for("training"):
        spec = training_spec(name, command=command, env=env, **LONGEST)
        script = render_user_data(spec)
        sizes[name] = (len(script.encode()), len(user_data_bytes(script)))
        assert len(base64.b64decode(user_data_base64(script))) == sizes[name][1] <= USER_DATA_MAX_BYTES
        assert len(user_data_base64(script)) <= 21847
    worst = max(sizes.values(), key=lambda s: s[1])
    with capsys.disabled():
        print(f"\nworst-case user data ({alphabet}): {worst[0]} bytes of script, {worst[1]} gzip", end="")
        print(f" (limit {USER_DATA_MAX_BYTES})")


def test_a_render_over_the_limit_is_refused_with_the_figure():
    rng = random.Random(3)
    huge = ("/opt/job/train.py", fill(ALPHABETS["printable"], 20000, rng))
    script = render_user_data(training_spec("p4d.24xlarge"))
    script += "# " + huge[1] + "\n"  # past the bounds the config tier keeps: only a render can get here
    with pytest.raises(
        ValueError, match=r"^the node bootstrap is \d+ bytes of user data \(gzip\), over EC2's 16383-byte"
    ):
        user_data_bytes(script)


def test_the_worst_case_startup_script_fits_a_compute_engine_metadata_value(capsys):
    sizes = []
    for alphabet in ALPHABETS.values():
        command, env = worst_job(alphabet)
        script = render_startup_script(gcp_bootstrap(command=command, env=env))
        sizes.append(len(script.encode()))
    with capsys.disabled():
        print(f"\nworst-case GCP startup script: {max(sizes)} bytes (limit {STARTUP_SCRIPT_MAX_BYTES})")
    assert max(sizes) <= STARTUP_SCRIPT_MAX_BYTES


@pytest.mark.parametrize("stack", ["training-demo", "training-gcp-demo"])
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            [f"mlinfra:training.job.command[{i}]=x" for i in range(1, MAX_COMMAND_ARGS + 1)],
            f"mlinfra:training.job.command: command has {MAX_COMMAND_ARGS + 1} arguments; at most {MAX_COMMAND_ARGS}",
        ),
        (
            ["mlinfra:training.job.command[1]=" + "é" * 1550],
            # 3,100 bytes of "é" and the demo's script and config paths (27 + 32 bytes)
            "mlinfra:training.job.command: command is 3159 bytes (UTF-8) in all; at most 3072, so the node bootstrap "
            "fits the cloud's user data limit",
        ),
        (
            ["mlinfra:training.job.env.BIG=" + "x" * 3069],
            "mlinfra:training.job.env: env is 3073 bytes (UTF-8) of KEY=value in all; at most 3072",
        ),
    ],
)
def test_oversized_job_fields_exit_2_naming_the_field_and_the_figure(stack, overrides, message, capsys):
    args = [arg for override in overrides for arg in ("-c", override)]
    assert main(["preview", "--stack", stack, *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
