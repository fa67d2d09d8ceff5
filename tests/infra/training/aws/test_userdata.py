"""Node bootstrap script: golden files, bash syntax, quoting, and a simulated cluster run.

The golden files pin the rendered script byte for byte. After an intended change to
infra/training/aws/userdata.py, rewrite them and review the diff:

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/infra/training/aws/test_userdata.py
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from infra.catalog.aws import instance_type
from infra.training.aws.efa import efa_device_count, efa_layout
from infra.training.aws.plan import LOGICAL_NEURON_CORE_SIZE
from infra.training.aws.userdata import NodeBootstrap, render_user_data

GOLDEN = Path(__file__).parent / "golden"
BASH = shutil.which("bash")


def training_spec(type_name: str, **overrides) -> NodeBootstrap:
    """A fixed spec for `type_name`, with device and EFA counts taken from the catalog."""
    t = instance_type(type_name)
    (accelerator,) = t.accelerators
    neuron = t.accelerator_kind == "neuron"
    fields = dict(
        run_id="demo-001",
        node_count=4,
        accelerator_kind=t.accelerator_kind,
        devices_per_node=accelerator.count,
        efa_devices=efa_device_count(efa_layout(t)),
        processes_per_node=accelerator.count
        * accelerator.cores_per_device
        // LOGICAL_NEURON_CORE_SIZE.get(accelerator.model, 1)
        if neuron
        else None,
        lustre_dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
        lustre_mount_name="abcdefgh",
        registry_bucket="mlinfra-registry-123456789012",
        registry_region="us-east-1",
        registry_kms_key_id="arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
        command=("/opt/mlinfra/train.py", "--config", "configs/llama-8b.yaml", "--save-every=1000"),
        env={"NCCL_DEBUG": "WARN"} if not neuron else {"NEURON_CC_FLAGS": "--model-type=transformer"},
    )
    fields.update(overrides)
    return NodeBootstrap(**fields)


GOLDEN_SPECS = {
    "userdata_p4d.sh": lambda: training_spec("p4d.24xlarge", stop_at_epoch=1795334400, expires_at_epoch=1795335300),
    "userdata_trn1.sh": lambda: training_spec("trn1.32xlarge"),
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
    script.write_text(render_user_data(GOLDEN_SPECS[filename]()))
    result = subprocess.run([BASH, "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
@pytest.mark.parametrize("filename", sorted(GOLDEN_SPECS))
def test_rendered_script_passes_shellcheck(filename, tmp_path):
    script = tmp_path / "user-data.sh"
    script.write_text(render_user_data(GOLDEN_SPECS[filename]()))
    result = subprocess.run(["shellcheck", "-s", "bash", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_gpu_and_neuron_environments():
    gpu = render_user_data(training_spec("p5.48xlarge"))
    assert "export FI_PROVIDER=efa\nexport FI_EFA_USE_DEVICE_RDMA=1\nexport FI_EFA_USE_HUGE_PAGE=0\n" in gpu
    assert "NEURON_RT" not in gpu and "export NCCL_" not in gpu.replace("export NCCL_DEBUG=WARN", "")
    neuron = render_user_data(training_spec("trn2.48xlarge"))
    assert 'export NEURON_RT_ROOT_COMM_ID="${MLINFRA_RENDEZVOUS_HOST}:41000"' in neuron
    assert "export FI_EFA_FORK_SAFE=1" in neuron
    assert "MLINFRA_NPROC_PER_NODE=64" in neuron  # 16 Trainium2 chips x 8 NeuronCores, 2 per logical core
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


# ---- a simulated cluster: the real script on N local "nodes", with AWS and torchrun stubbed ----

STUBS = {
    "curl": """#!/bin/bash
case "$*" in
  *api/token*) echo token ;;
  *local-ipv4*) echo "$FAKE_IP" ;;
  *) exit 22 ;;
esac
""",
    "mountpoint": "#!/bin/bash\nexit 0\n",
    "mount": "#!/bin/bash\nexit 32\n",
    "aws": """#!/bin/bash
key=${4#s3://}
cat > "$FAKE_S3/${key//\\//__}"
printf '%s\\n' "$@" > "$FAKE_S3/${key//\\//__}.args"
""",
    # Never the machine's own shutdown: record that the node would power off.
    "shutdown": """#!/bin/bash
printf '%s\\n' "$@" > "$FAKE_OUT/shutdown.$FAKE_IP"
""",
    # HSM state of checkpoint files: FAKE_LFS_STATE, e.g. "exists archived" (exported) or "exists dirty".
    "lfs": """#!/bin/bash
shift
for f in "$@"; do echo "$f: (0x00000009) ${FAKE_LFS_STATE:-exists archived}, archive_id:1"; done
""",
    "torchrun": """#!/bin/bash
printf '%s\\0' "$@" > "$FAKE_OUT/args.$FAKE_IP"
env | grep -E '^(FI_|NEURON_|NCCL_|MLINFRA_|JOB_)' | sort > "$FAKE_OUT/env.$FAKE_IP"
# A long job whose worker saves a checkpoint and ends cleanly on SIGTERM:
if [[ -n "$FAKE_RUN_SECONDS" ]]; then
  trap 'echo "agent got TERM" > "$FAKE_OUT/agent-term.$FAKE_IP"' TERM
  bash -c 'sleep "$FAKE_RUN_SECONDS" &
    trap "kill \\$!; echo saved > \"$FAKE_OUT/stopped.$FAKE_IP\"; exit 0" TERM; wait' &
  wait $!
  exit $?
fi
exit "${FAKE_EXIT:-0}"
""",
}


def run_cluster(
    tmp_path: Path,
    spec: NodeBootstrap,
    ips,
    exit_codes=None,
    efa_found=None,
    lfs_state=None,
    checkpoint=False,
    run_seconds=None,
    poll_cap=None,
):
    """Run the bootstrap on one bash per ip. `poll_cap` shortens the script's poll sleeps to at most that many
    seconds, for tests whose timeouts are shorter than a poll interval (its deadlines use bash's SECONDS, so
    the timeouts themselves still take their time)."""
    fsx, ib, s3, out, bin_dir = (tmp_path / d for d in ("fsx", "ib", "s3", "out", "bin"))
    for d in (fsx, ib, s3, out, bin_dir):
        d.mkdir()
    for i in range(spec.efa_devices if efa_found is None else efa_found):
        (ib / f"rdmap{i}").mkdir()
    for name, body in STUBS.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(stat.S_IRWXU)
    if poll_cap is not None:
        (bin_dir / "sleep").write_text(
            f'#!/bin/bash\nexec /bin/sleep "$(awk -v s="$1" \'BEGIN {{ print (s > {poll_cap}) ? {poll_cap} : s }}\')"\n'
        )
        (bin_dir / "sleep").chmod(stat.S_IRWXU)
    if checkpoint:
        (fsx / "checkpoints").mkdir()
        (fsx / "checkpoints" / "step-100.pt").write_text("weights")
    script = render_user_data(spec).replace("/fsx", str(fsx)).replace("/sys/class/infiniband", str(ib))
    # The script pins its PATH to the system's directories: point it at the stubs instead.
    script = re.sub(r"^PATH=.*$", f"PATH={bin_dir}:/usr/bin:/bin", script, count=1, flags=re.M)
    (tmp_path / "user-data.sh").write_text(script)
    nodes = []
    for ip in ips:
        env = {
            "PATH": f"{bin_dir}:/usr/bin:/bin",
            "FAKE_IP": ip,
            "FAKE_EXIT": str((exit_codes or {}).get(ip, 0)),
            "FAKE_S3": str(s3),
            "FAKE_OUT": str(out),
            "FAKE_LFS_STATE": lfs_state or "exists archived",
            "FAKE_RUN_SECONDS": str(run_seconds or ""),
        }
        command = [BASH, str(tmp_path / "user-data.sh")]
        nodes.append(subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    codes = {ip: node.wait(timeout=120) for ip, node in zip(ips, nodes, strict=True)}
    logs = {ip: node.stdout.read().decode() for ip, node in zip(ips, nodes, strict=True)}
    markers = {p.name: p for p in s3.iterdir() if not p.name.endswith(".args")}
    return codes, logs, markers, out


def sim_spec(**overrides) -> NodeBootstrap:
    base = dict(node_count=3, efa_devices=4, registry_kms_key_id=None, rendezvous_timeout_seconds=60)
    return training_spec("p4d.24xlarge", **{**base, **overrides})


@pytest.mark.skipif(BASH is None, reason="bash not installed")
def test_simulated_cluster_ranks_nodes_and_reports_success(tmp_path):
    ips = ["10.0.1.30", "10.0.1.4", "10.0.1.200"]
    spec = sim_spec(command=("train.py", "--tag", "; touch PWNED #"), env={"JOB_NOTE": "$(touch PWNED) x"})
    codes, logs, markers, out = run_cluster(tmp_path, spec, ips)
    assert codes == dict.fromkeys(ips, 0), logs
    ordered = sorted(ips)  # "10.0.1.200" < "10.0.1.30" < "10.0.1.4": byte order, the same on every node
    for ip in ips:
        args = (out / f"args.{ip}").read_bytes().decode().split("\0")[:-1]
        assert args == [
            "--nnodes=3",
            "--nproc-per-node=8",
            f"--node-rank={ordered.index(ip)}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={ordered[0]}:29500",
            "--rdzv-id=demo-001",
            "train.py",
            "--tag",
            "; touch PWNED #",
        ]
        env = (out / f"env.{ip}").read_text()
        assert "FI_PROVIDER=efa\n" in env and f"MLINFRA_NODE_RANK={ordered.index(ip)}\n" in env
        assert "JOB_NOTE=$(touch PWNED) x\n" in env  # the job's env reaches the job, verbatim
        assert f"MLINFRA_CHECKPOINTS_DIR={tmp_path}/fsx/checkpoints\n" in env
    assert not (tmp_path / "PWNED").exists()
    assert sorted((tmp_path / "fsx/runs/demo-001/hosts").iterdir()) == sorted(
        tmp_path / "fsx/runs/demo-001/hosts" / ip for ip in ips
    )
    assert list(markers) == ["mlinfra-registry-123456789012__runs__demo-001___SUCCESS"]
    marker = json.loads(next(iter(markers.values())).read_text())
    assert {k: marker[k] for k in ("run_id", "status", "exit_code", "node_count", "rank", "host")} == {
        "run_id": "demo-001",
        "status": "SUCCESS",
        "exit_code": 0,
        "node_count": 3,
        "rank": 0,
        "host": ordered[0],
    }
    assert marker["expires_at"] == 0  # this deployment has no expiry: the marker says which deployment wrote it
    assert marker["started_at"] <= marker["ended_at"] and marker["ended_at"].endswith("Z")
    args = (tmp_path / "s3" / f"{next(iter(markers))}.args").read_text().split("\n")
    assert args[:4] == ["s3", "cp", "-", "s3://mlinfra-registry-123456789012/runs/demo-001/_SUCCESS"]
    assert "--sse\naws:kms\n" in "\n".join(args)
    assert marker["checkpoints_exported"] is True
    for ip in ips:  # every node powers off once its job ends
        assert (out / f"shutdown.{ip}").read_text().startswith("-h\n+1\n")


@pytest.mark.skipif(BASH is None, reason="bash not installed")
def test_success_waits_for_checkpoints_to_reach_the_registry(tmp_path):
    spec = sim_spec(node_count=1, export_timeout_seconds=1)
    codes, logs, markers, _ = run_cluster(
        tmp_path, spec, ["10.0.3.1"], lfs_state="exists dirty archived", checkpoint=True, poll_cap=0.2
    )
    assert codes == {"10.0.3.1": 0}, logs
    assert list(markers) == ["mlinfra-registry-123456789012__runs__demo-001___FAILED"]
    marker = json.loads(next(iter(markers.values())).read_text())
    assert (marker["status"], marker["exit_code"], marker["checkpoints_exported"]) == ("FAILED", 0, False)
    assert "1 checkpoint files still not exported after 1s" in logs["10.0.3.1"]


@pytest.mark.skipif(BASH is None, reason="bash not installed")
def test_exported_checkpoints_let_the_run_succeed(tmp_path):
    codes, logs, markers, _ = run_cluster(tmp_path, sim_spec(node_count=1), ["10.0.3.2"], checkpoint=True)
    assert list(markers) == ["mlinfra-registry-123456789012__runs__demo-001___SUCCESS"], logs


@pytest.mark.skipif(BASH is None, reason="bash not installed")
def test_simulated_job_failure_is_reported_by_rank_0(tmp_path):
    ips = ["10.0.2.1", "10.0.2.2"]
    codes, logs, markers, _ = run_cluster(tmp_path, sim_spec(node_count=2), ips, exit_codes={"10.0.2.1": 3})
    assert codes == {"10.0.2.1": 3, "10.0.2.2": 0}, logs
    assert list(markers) == ["mlinfra-registry-123456789012__runs__demo-001___FAILED"]
    marker = json.loads(next(iter(markers.values())).read_text())
    assert (marker["status"], marker["exit_code"], marker["rank"]) == ("FAILED", 3, 0)


@pytest.mark.skipif(BASH is None, reason="bash not installed")
def test_simulated_rendezvous_timeout_fails_the_run(tmp_path):
    spec = sim_spec(node_count=2, rendezvous_timeout_seconds=1)
    codes, logs, markers, out = run_cluster(tmp_path, spec, ["10.0.3.1"], poll_cap=0.2)
    assert codes == {"10.0.3.1": 1}
    assert "rendezvous timed out after 1s: 1 of 2 nodes checked in" in logs["10.0.3.1"]
    marker = json.loads(markers["mlinfra-registry-123456789012__runs__demo-001___FAILED"].read_text())
    assert (marker["exit_code"], marker["rank"]) == (1, None)
    assert not list(out.glob("args.*"))  # torchrun never started
    assert (out / f"shutdown.{next(iter(codes))}").exists()  # and the node powers off


@pytest.mark.skipif(BASH is None, reason="bash not installed")
def test_simulated_node_missing_efa_devices_fails_fast(tmp_path):
    codes, logs, markers, out = run_cluster(tmp_path, sim_spec(node_count=1), ["10.0.4.1"], efa_found=2)
    assert codes == {"10.0.4.1": 1}
    assert "expected 4 EFA devices, found 2" in logs["10.0.4.1"]
    assert list(markers) == ["mlinfra-registry-123456789012__runs__demo-001___FAILED"]
    assert not list(out.glob("args.*"))  # torchrun never started
    assert (out / f"shutdown.{next(iter(codes))}").exists()  # and the node powers off


def test_shlex_quoting_is_what_the_golden_files_show():
    script = render_user_data(training_spec("p4d.24xlarge", command=("train.py", "a b")))
    assert f"mlinfra_command=(train.py {shlex.quote('a b')})" in script


@pytest.mark.skipif(BASH is None, reason="bash not installed")
def test_grace_period_stops_the_job_before_expiry_and_the_run_ends_normally(tmp_path):
    import time

    spec = sim_spec(node_count=1, stop_at_epoch=int(time.time()) + 1, expires_at_epoch=int(time.time()) + 3600)
    started = time.monotonic()
    codes, logs, markers, out = run_cluster(tmp_path, spec, ["10.0.5.1"], run_seconds=60, checkpoint=True)
    assert codes == {"10.0.5.1": 0}, logs
    assert time.monotonic() - started < 30  # stopped by the grace signal, not by the job's own end
    assert (out / "stopped.10.0.5.1").read_text() == "saved\n"
    assert "expiry grace period reached: asking the workers to save and stop" in logs["10.0.5.1"]
    assert not (out / "agent-term.10.0.5.1").exists()  # torchrun itself is left to see its workers end
    assert list(markers) == ["mlinfra-registry-123456789012__runs__demo-001___SUCCESS"]
    marker = json.loads(next(iter(markers.values())).read_text())
    assert marker["expires_at"] == spec.expires_at_epoch  # the deployment that wrote it
    assert (out / "shutdown.10.0.5.1").exists()


@pytest.mark.skipif(BASH is None, reason="bash not installed")
def test_without_export_the_marker_follows_the_exit_code_and_waits_for_nothing(tmp_path):
    spec = sim_spec(node_count=1, export_checkpoints=False, export_timeout_seconds=3600)
    codes, logs, markers, _ = run_cluster(tmp_path, spec, ["10.0.6.1"], lfs_state="exists dirty", checkpoint=True)
    assert codes == {"10.0.6.1": 0}, logs
    marker = json.loads(markers["mlinfra-registry-123456789012__runs__demo-001___SUCCESS"].read_text())
    assert (marker["status"], marker["checkpoints_exported"]) == ("SUCCESS", False)


@pytest.mark.skipif(BASH is None, reason="bash not installed")
def test_kept_nodes_do_not_power_off(tmp_path):
    codes, logs, markers, out = run_cluster(tmp_path, sim_spec(node_count=1, power_off_on_exit=False), ["10.0.7.1"])
    assert codes == {"10.0.7.1": 0}, logs
    assert list(markers) == ["mlinfra-registry-123456789012__runs__demo-001___SUCCESS"]
    assert not (out / "shutdown.10.0.7.1").exists()


@pytest.mark.skipif(BASH is None, reason="bash not installed")
def test_every_node_schedules_its_own_power_off_after_expiry(tmp_path):
    import time

    expires = int(time.time()) + 3600
    spec = sim_spec(node_count=1, power_off_on_exit=False, expires_at_epoch=expires)
    codes, logs, markers, out = run_cluster(tmp_path, spec, ["10.0.8.1"])
    assert codes == {"10.0.8.1": 0}, logs
    args = (out / "shutdown.10.0.8.1").read_text().split("\n")
    # 3600 s to expiry + 300 s backstop, rounded up to whole minutes (65, or 66 across a second boundary)
    assert args[0] == "-h" and args[1] in ("+65", "+66") and args[2] == "mlinfra: run demo-001 expires"
