"""Node bootstrap script: golden files, bash syntax, shellcheck, quoting, and what each accelerator's node is told.
The simulated cluster runs are in test_bootstrap_sim.py.

The golden files pin the rendered script byte for byte. After an intended change to the bootstrap
(infra/training/bootstrap.sh, bootstrap.py, aws/userdata.py, aws/platform.sh), rewrite them and review the diff:

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/infra/training/aws/test_userdata.py
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from infra.training.aws.userdata import render_user_data
from tests.helpers import shellcheck
from tests.infra.training.aws.bootstrap_sim import BASH, training_spec

GOLDEN = Path(__file__).parent / "golden"


GOLDEN_SPECS = {
    "userdata_p4d.sh": lambda: training_spec(
        "p4d.24xlarge", stop_at_epoch=1795334400, expires_at_epoch=1795335300, torchrun="/opt/pytorch/bin/torchrun"
    ),
    "userdata_trn1.sh": lambda: training_spec(
        "trn1.32xlarge", torchrun="/opt/aws_neuronx_venv_pytorch_2_8/bin/torchrun"
    ),
}


@pytest.mark.parametrize("filename", sorted(GOLDEN_SPECS))
def test_rendered_script_matches_golden(filename):
    rendered = render_user_data(GOLDEN_SPECS[filename]())
    path = GOLDEN / filename
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        path.write_bytes(rendered.encode())
    assert path.read_bytes() == rendered.encode(), f"{filename} differs; see this module's docstring"


@pytest.mark.skipif(BASH is None, reason="bash not installed")
@pytest.mark.parametrize("filename", sorted(GOLDEN_SPECS))
def test_rendered_script_is_valid_bash(filename, tmp_path):
    script = tmp_path / "user-data.sh"
    script.write_text(render_user_data(GOLDEN_SPECS[filename]()), encoding="utf-8")
    result = subprocess.run([BASH, "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("filename", sorted(GOLDEN_SPECS))
def test_rendered_script_passes_shellcheck(filename, tmp_path):
    script = tmp_path / "user-data.sh"
    script.write_text(render_user_data(GOLDEN_SPECS[filename]()), encoding="utf-8")
    result = shellcheck(script)
    assert result.returncode == 0, result.stdout


def test_gpu_and_neuron_environments():
    gpu = render_user_data(training_spec("p5.48xlarge"))
    assert "export FI_PROVIDER=efa\nexport FI_EFA_USE_DEVICE_RDMA=1\nexport FI_EFA_USE_HUGE_PAGE=0\n" in gpu
    # NCCL over the aws-ofi-nccl plugin the image check found, and no other network (no fallback to sockets)
    assert 'export NCCL_NET_PLUGIN="${MLINFRA_NCCL_NET_PLUGIN}"\nexport NCCL_NET=OFI\n' in gpu
    assert "find_library MLINFRA_NCCL_NET_PLUGIN 'the aws-ofi-nccl plugin (NCCL over EFA)' " in gpu
    assert "NEURON_RT" not in gpu
    neuron = render_user_data(training_spec("trn2.48xlarge"))
    assert 'export NEURON_RT_ROOT_COMM_ID="${MLINFRA_RENDEZVOUS_HOST}:41000"' in neuron
    assert "export FI_EFA_FORK_SAFE=1" in neuron
    assert "MLINFRA_NPROC_PER_NODE=64" in neuron  # 16 Trainium2 chips x 8 NeuronCores, 2 per logical core
    assert "NCCL_NET" not in neuron and "find_library" not in neuron.split("find_library() {")[1]  # no NCCL plugin
    assert "--backend xla" in neuron and "--backend nccl" in gpu
    no_rdma = render_user_data(training_spec("p4d.24xlarge", efa_device_rdma=False))
    assert "FI_EFA_USE_DEVICE_RDMA" not in no_rdma


def test_marker_write_uses_kms_and_the_registry_key():
    script = render_user_data(training_spec("p4d.24xlarge"))
    assert (
        "--sse aws:kms --sse-kms-key-id "
        "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab" in script
    )
    assert "MLINFRA_MARKER_URI=s3://mlinfra-registry-123456789012/runs/demo-001\n" in script
    without_key = render_user_data(training_spec("p4d.24xlarge", registry_kms_key_id=None))
    assert "--sse aws:kms \\\n" in without_key and "--sse-kms-key-id" not in without_key


HOSTILE = ("; touch PWNED #", "$(touch PWNED)", "`touch PWNED`", "a'b\"c", "x\ny", "*", "")


@pytest.mark.skipif(BASH is None, reason="bash not installed")
def test_command_and_env_values_reach_the_job_verbatim(tmp_path):
    spec = training_spec("p4d.24xlarge", command=("train.py", *HOSTILE), env={"HOSTILE": "$(touch PWNED); `x` 'q'"})
    script = render_user_data(spec)
    # The array may span lines (a newline inside a quoted argument): take everything up to its close.
    start = script.index("mlinfra_command=(")
    end = script.index(")\nlog ", start) + 1
    env_line = next(line for line in script.splitlines() if line.startswith("mlinfra_job_env=("))
    probe = (
        f"{script[start:end]}\n{env_line}\n"
        'printf \'%s\\0\' "${mlinfra_command[@]}"; env "${mlinfra_job_env[@]}" printenv HOSTILE\n'
    )
    result = subprocess.run([BASH, "-c", probe], capture_output=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().split("\0") == ["train.py", *HOSTILE, "$(touch PWNED); `x` 'q'\n"]
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(node_count=0), "node_count must be a whole number >= 1 (got 0)"),
        (
            dict(generation="../g1"),
            "generation must be 1-80 letters, digits, '.', '_' or '-', starting with a letter or digit (got '../g1')",
        ),
        (dict(efa_devices=-1), "efa_devices must be a whole number >= 0 (got -1)"),
        (dict(accelerator_kind="tpu"), "accelerator_kind must be 'gpu' or 'neuron' (got 'tpu')"),
        (dict(command=()), "command must name the training script (and its arguments) as torchrun takes them"),
        (
            dict(env={"MLINFRA_NODE_RANK": "3"}),
            "env key 'MLINFRA_NODE_RANK' is reserved: MLINFRA_* are the bootstrap's own variables",
        ),
        (dict(env={"IFS": ","}), "env key 'IFS' is reserved: the node's bootstrap and its shell own it"),
        (
            dict(env={"NOTE": "run @@COMMAND@@"}),
            "env value for 'NOTE' must not contain '@@' (the bootstrap template's markers)",
        ),
        (dict(command=("train.py", "a\x00b")), "command[1] must not contain a NUL byte"),
        (dict(stop_at_epoch=0), "stop_at_epoch must be a Unix time >= 1 (got 0)"),
        (dict(expires_at_epoch=-5), "expires_at_epoch must be a Unix time >= 1 (got -5)"),
        (
            dict(env={"A B": "1"}),
            "env key 'A B' must be a shell variable name (letters, digits, '_', not starting with a digit)",
        ),
        (dict(checkpoints_dir="/tmp/ckpt"), "checkpoints_dir must be a directory under /fsx/ (got '/tmp/ckpt')"),
        (dict(datasets_dir="/fsx/../etc"), "datasets_dir must be a directory under /fsx/ (got '/fsx/../etc')"),
        (
            dict(registry_region="us-east"),
            "registry_region must be an AWS region name like us-east-1 (got 'us-east')",
        ),
        (
            dict(run_id="a;b"),
            "run_id: registry prefix 'runs/a;b/': segment 'a;b' must be letters, digits, '.', '_', '=' or '-' "
            "(no wildcards, no '..')",
        ),
    ],
)
def test_bad_specs_name_the_field(overrides, message):
    with pytest.raises(ValueError) as err:
        training_spec("p4d.24xlarge", **overrides)
    assert str(err.value) == message


def test_shlex_quoting_is_what_the_golden_files_show():
    script = render_user_data(training_spec("p4d.24xlarge", command=("train.py", "a b")))
    assert f"mlinfra_command=(train.py {shlex.quote('a b')})" in script
