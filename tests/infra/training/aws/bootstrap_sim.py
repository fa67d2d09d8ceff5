"""The AWS node bootstrap on a simulated cluster: the real rendered script, one bash per "node", with the image's
commands (aws, lfs, mount.lustre, fi_info, torchrun, shutdown, curl) replaced by stand-ins that record what they
were asked and answer as the test says. Paths the script uses on a real node (/fsx, /sys/class/infiniband,
/var/lib/mlinfra, /opt/amazon/...) point into the test's temporary directory."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from infra.catalog.aws import instance_type
from infra.training.aws.efa import efa_device_count, efa_layout
from infra.training.aws.images import image_for
from infra.training.aws.plan import LOGICAL_NEURON_CORE_SIZE
from infra.training.aws.userdata import NodeBootstrap, render_user_data
from infra.training.launch import launch_generation, plan_fabric_gate

BASH = shutil.which("bash")
MARKER = "mlinfra-registry-123456789012__runs__demo-001___{}"


def training_spec(type_name: str, **overrides) -> NodeBootstrap:
    """A fixed spec for `type_name`, with device and EFA counts, image facts and the fabric gate from the catalog."""
    t = instance_type(type_name)
    (accelerator,) = t.accelerators
    neuron = t.accelerator_kind == "neuron"
    node_count = overrides.get("node_count", 4)
    fields = dict(
        run_id="demo-001",
        node_count=node_count,
        generation=launch_generation(type_name, node_count, "us-east-1a", "on-demand"),
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
        image=image_for(t.accelerator_kind).facts,
        fabric_gate=plan_fabric_gate("aws", type_name, node_count, "xla" if neuron else "nccl", False),
    )
    fields.update(overrides)
    return NodeBootstrap(**fields)


def sim_spec(**overrides) -> NodeBootstrap:
    base = dict(node_count=3, efa_devices=4, registry_kms_key_id=None, rendezvous_timeout_seconds=60)
    return training_spec("p4d.24xlarge", **{**base, **overrides})


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
    "mount.lustre": "#!/bin/bash\nexit 0\n",
    "fi_info": '#!/bin/bash\nexit "${FAKE_FI_INFO:-0}"\n',
    "aws": """#!/bin/bash
key=${4#s3://}
cat > "$FAKE_S3/${key//\\//__}"
printf '%s\\n' "$@" > "$FAKE_S3/${key//\\//__}.args"
""",
    # Never the machine's own shutdown: record that the node would power off.
    "shutdown": """#!/bin/bash
printf '%s\\n' "$@" > "$FAKE_OUT/shutdown.$FAKE_IP"
""",
    # Lustre 2.15's `lfs hsm_state` (lustre/utils/lfs.c): "<path>: (0x%08x)" and the flag words; it stops at the
    # first file it cannot read, exit non-zero. FAKE_LFS_FLAGS: the hex flags of every file (9: exists archived);
    # FAKE_LFS_FAIL=1: it fails on every file, printing nothing on stdout.
    "lfs": """#!/bin/bash
shift
for f in "$@"; do
  if [[ -n "$FAKE_LFS_FAIL" ]]; then echo "can't get hsm state for $f: No such device" >&2; exit 19; fi
  flags=$((16#${FAKE_LFS_FLAGS:-00000009}))
  words=""
  (( flags & 4 )) && words+=" released"
  (( flags & 1 )) && words+=" exists"
  (( flags & 2 )) && words+=" dirty"
  (( flags & 8 )) && words+=" archived"
  (( flags & 64 )) && words+=" lost_from_hsm"
  printf '%s: (0x%08x)%s, archive_id:1\\n' "$f" "$flags" "$words"
done
""",
    "torchrun": """#!/bin/bash
if [[ " $* " == *fabric_check.py* ]]; then
  printf '%s\\0' "$@" > "$FAKE_OUT/gate-args.$FAKE_IP"
  env | grep -E '^(FI_|NEURON_|NCCL_)' | sort > "$FAKE_OUT/gate-env.$FAKE_IP"
  result=""; prev=""
  for a in "$@"; do [[ "$prev" == --result ]] && result=$a; prev=$a; done
  case "${FAKE_GATE:-pass}" in
    pass) echo "all-reduce bus bandwidth 75.34 GB/s across 24 ranks, at or above the floor of 12.5 GB/s" > "$result" ;;
    slow) echo "all-reduce bus bandwidth 4.08 GB/s across 24 ranks, below the floor of 12.5 GB/s" > "$result"
          exit 1 ;;
    silent) exit 1 ;;
  esac
  exit 0
fi
# Until it starts its worker the agent runs builtins only, as torchrun starts no process before its workers (the
# grace stopper's `pkill -P` would take any child, a `grep` or a `sleep`, for a worker).
printf '%s\\0' "$@" > "$FAKE_OUT/args.$FAKE_IP"
for name in ${!FI_@} ${!JOB_@} ${!MLINFRA_@} ${!NCCL_@} ${!NEURON_@}; do
  printf '%s=%s\\n' "$name" "${!name}"
done > "$FAKE_OUT/env.$FAKE_IP"
# A long job whose worker saves a checkpoint and ends cleanly on SIGTERM, started after FAKE_WORKER_DELAY seconds
# (torchrun's rendezvous), waited for on the fifo start_node made (a read that times out: no child process):
if [[ -n "$FAKE_RUN_SECONDS" ]]; then
  trap 'echo "agent got TERM" > "$FAKE_OUT/agent-term.$FAKE_IP"' TERM
  if [[ -n "$FAKE_WORKER_DELAY" ]]; then
    read -r -t "$FAKE_WORKER_DELAY" <> "$FAKE_OUT/delay.$FAKE_IP" || true
  fi
  bash -c 'sleep "$FAKE_RUN_SECONDS" &
    trap "kill \\$!; echo saved > \"$FAKE_OUT/stopped.$FAKE_IP\"; exit 0" TERM; wait' &
  wait $!
  exit $?
fi
exit "${FAKE_EXIT:-0}"
""",
}


@dataclass
class Cluster:
    """The simulated cluster's directories, and what its nodes did once `run` returns."""

    root: Path
    codes: dict[str, int]
    logs: dict[str, str]

    @property
    def s3(self) -> Path:
        return self.root / "s3"

    @property
    def out(self) -> Path:
        return self.root / "out"

    @property
    def fsx(self) -> Path:
        return self.root / "fsx"

    def markers(self) -> dict[str, Path]:
        return {p.name: p for p in self.s3.iterdir() if not p.name.endswith(".args")}


NODE = "@SIM_NODE@"  # in the prepared script, where start_node puts the node's ip


def prepare(tmp_path: Path, spec: NodeBootstrap, efa_found=None, checkpoint=False, poll_cap=None, plugin=True) -> Path:
    """The directories and stand-ins of a simulated cluster, and the script every node runs."""
    fsx, ib, s3, out, bin_dir, state = (tmp_path / d for d in ("fsx", "ib", "s3", "out", "bin", "state"))
    for d in (fsx, ib, s3, out, bin_dir, state):
        d.mkdir(exist_ok=True)
    for i in range(spec.efa_devices if efa_found is None else efa_found):
        (ib / f"rdmap{i}").mkdir(exist_ok=True)
    for name, body in STUBS.items():
        (bin_dir / name).write_text(body, encoding="utf-8")
        (bin_dir / name).chmod(stat.S_IRWXU)
    if plugin:
        (tmp_path / "ofi-nccl" / "lib").mkdir(parents=True, exist_ok=True)
        (tmp_path / "ofi-nccl" / "lib" / "libnccl-net-ofi.so").write_text("", encoding="utf-8")
    if poll_cap is not None:
        capped = f"awk -v s=\"$1\" 'BEGIN {{ print (s > {poll_cap}) ? {poll_cap} : s }}'"
        (bin_dir / "sleep").write_text(f'#!/bin/bash\nexec /bin/sleep "$({capped})"\n', encoding="utf-8")
        (bin_dir / "sleep").chmod(stat.S_IRWXU)
    if checkpoint:
        (fsx / "checkpoints").mkdir(exist_ok=True)
        (fsx / "checkpoints" / "step-100.pt").write_text("weights", encoding="utf-8")
    script = render_user_data(spec)
    for real, fake in (
        ("/fsx", fsx),
        ("/sys/class/infiniband", ib),
        ("/var/lib/mlinfra", state / NODE),  # each node's own, as on the instances: start_node names it
        ("/opt/amazon/efa/bin/fi_info", bin_dir / "fi_info"),
        ("/opt/amazon/ofi-nccl", tmp_path / "ofi-nccl"),
    ):
        script = script.replace(real, str(fake))
    # The script pins its PATH to the system's directories: point it at the stubs instead.
    script = re.sub(r"^PATH=.*$", f"PATH={bin_dir}:/usr/bin:/bin", script, count=1, flags=re.M)
    (tmp_path / "user-data.sh").write_text(script, encoding="utf-8")
    return tmp_path / "user-data.sh"


def start_node(tmp_path: Path, ip: str, **fake) -> subprocess.Popen:
    """One node: the script under bash, with FAKE_* settings for its stand-ins (exit, lfs_flags, gate, ...). Its
    state directory (/var/lib/mlinfra) is its own, state/<ip>: nodes sharing one would race on the fabric gate's
    result file, which no two instances do."""
    script = tmp_path / f"user-data.{ip}.sh"
    script.write_text((tmp_path / "user-data.sh").read_text(encoding="utf-8").replace(NODE, ip), encoding="utf-8")
    if fake.get("worker_delay") is not None:
        os.mkfifo(tmp_path / "out" / f"delay.{ip}")
    env = {
        "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin",
        "FAKE_IP": ip,
        "FAKE_S3": str(tmp_path / "s3"),
        "FAKE_OUT": str(tmp_path / "out"),
        **{f"FAKE_{k.upper()}": str(v) for k, v in fake.items() if v is not None},
    }
    return subprocess.Popen(
        [BASH, str(script)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def run(tmp_path: Path, spec: NodeBootstrap, ips, per_node=None, timeout=120, **options) -> Cluster:
    """Run the bootstrap on one bash per ip and wait for all of them. `per_node` maps an ip to its FAKE_* settings;
    the other keywords go to `prepare` (efa_found, checkpoint, poll_cap, plugin) or to every node's stand-ins."""
    prep = {k: options.pop(k) for k in ("efa_found", "checkpoint", "poll_cap", "plugin") if k in options}
    prepare(tmp_path, spec, **prep)
    nodes = {ip: start_node(tmp_path, ip, **{**options, **(per_node or {}).get(ip, {})}) for ip in ips}
    codes = {ip: node.wait(timeout=timeout) for ip, node in nodes.items()}
    logs = {ip: node.stdout.read().decode() for ip, node in nodes.items()}
    return Cluster(tmp_path, codes, logs)


def register_stale(hosts_dir: Path, ips, age_seconds: int = 600) -> None:
    """Registrations left by nodes that are gone: files nobody has touched for `age_seconds`."""
    hosts_dir.mkdir(parents=True, exist_ok=True)
    old = time.time() - age_seconds
    for ip in ips:
        (hosts_dir / ip).write_text(f"{ip}\n", encoding="utf-8")
        os.utime(hosts_dir / ip, (old, old))
