"""The training node's bootstrap script (bash user data), rendered by a pure function.

Every node of a run comes from one launch template, so every node runs the same script; a node learns
its rank from a rendezvous on the shared Lustre file system:

1. mount Lustre at /fsx (retrying while the file system's endpoint comes up);
2. check that the node exposes the EFA devices its launch template attached;
3. read the node's private IP from IMDSv2 (token, then meta-data/local-ipv4), write it to
   /fsx/runs/<run-id>/hosts/<ip>, wait (bounded) until `node_count` hosts are there, sort them: a node's
   rank is its index, and rank 0 hosts the torchrun c10d rendezvous;
4. set the libfabric/EFA environment (plus the Neuron runtime's on Trainium) and run `torchrun`;
5. on any exit (EXIT trap), rank 0 waits (bounded) until Lustre has exported every checkpoint, then writes
   `runs/<run-id>/_SUCCESS` (exit 0 and checkpoints exported) or `_FAILED` to the registry with
   `aws s3 cp --sse aws:kms`: JSON with the exit code, start and end times and the node count. A node
   that fails before it knows its rank writes `_FAILED` too, since the run cannot start without it;
6. every node then powers off (`shutdown -h +1`), which the launch template turns into termination;
7. with an expiry, every node sends SIGTERM to the job's workers at expires-at minus the grace period,
   so they save a last checkpoint and end through step 5 before the run guard's hard stop; and at boot
   every node schedules its own power-off a few minutes after expires-at, a cap that needs nothing else.

NCCL needs no NCCL_* settings on EFA with aws-ofi-nccl >= 1.7 and libfabric >= 1.18 (REFERENCE.md);
FI_EFA_USE_HUGE_PAGE=0 avoids ENOMEM on fork. Neuron (from the Neuron multi-node recipes):
FI_EFA_FORK_SAFE=1 and NEURON_RT_ROOT_COMM_ID=<rank-0 ip>:<port>, a port distinct from torchrun's.

Every value that comes from the spec is shell-quoted with `shlex.quote`; the training command is a bash
array, so its arguments reach torchrun verbatim. Internal shell variables are prefixed MLINFRA_ and
user `env` keys may not use that prefix, so user settings cannot change what the script itself does.
"""
from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from infra.training.limits import EXPORT_WAIT_SECONDS, NODE_BACKSTOP_SECONDS, NODE_POWER_OFF_DELAY_SECONDS
from infra.core.naming import bucket_name_problem, is_region_name
from infra.registry.layout import runs_prefix

MOUNT_POINT = "/fsx"
# Directories under MOUNT_POINT that the file system links to the registry (data repository associations).
DATASETS_PATH = "/datasets"
CHECKPOINTS_PATH = "/checkpoints"
RDZV_PORT = 29500
NEURON_ROOT_COMM_PORT = 41000
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Shell variables whose value changes how bash itself behaves.
_SHELL_OWNED = frozenset(
    {"IFS", "SECONDS", "SHELLOPTS", "BASHOPTS", "BASH_ENV", "ENV", "PS4", "BASH_XTRACEFD"}
)


@dataclass(frozen=True)
class Platform:
    """The cloud's parts of the bootstrap. Everything else - the expiry backstop, retries, the exit trap and
    marker JSON, the Lustre mount, the rendezvous and ranks, the job environment, torchrun and the grace
    period - is the one shared template, so both clouds run the same logic."""

    variables_a: str          # MLINFRA_* assignments after MLINFRA_NPROC_PER_NODE
    variables_b: str          # ... after MLINFRA_MARKER_URI
    export_functions: str     # defines wait_for_export: 0 once the checkpoints are in the registry
    marker_upload: str        # the pipe stage that stores the marker JSON (stdin) as ${MLINFRA_MARKER_URI}/_${status}
    devices_check: str        # checks the fabric devices after the mount
    private_ip: str           # sets MLINFRA_PRIVATE_IP from the metadata service
    metadata_name: str        # how messages name the metadata service
    power_off_means: str      # what powering off does to the node, for the script's comments
    power_off_on_exit_note: str

    def slots(self) -> dict[str, str]:
        return {"PLATFORM_VARIABLES_A": self.variables_a, "PLATFORM_VARIABLES_B": self.variables_b,
                "EXPORT_FUNCTIONS": self.export_functions, "MARKER_UPLOAD": self.marker_upload,
                "DEVICES_CHECK": self.devices_check, "PRIVATE_IP": self.private_ip,
                "METADATA_NAME": self.metadata_name, "POWER_OFF_MEANS": self.power_off_means,
                "POWER_OFF_ON_EXIT_NOTE": self.power_off_on_exit_note}


@dataclass(frozen=True)
class NodeBootstrap:
    """What a training node needs to join its run. Build from the catalog and the stack's resources."""

    run_id: str
    node_count: int
    accelerator_kind: Literal["gpu", "neuron"]
    devices_per_node: int  # GPUs, or Neuron devices (chips)
    efa_devices: int  # EFA devices the launch template attaches (infra.training.aws.efa.efa_device_count)
    lustre_dns_name: str
    lustre_mount_name: str
    registry_bucket: str
    registry_region: str
    checkpoints_dir: str = MOUNT_POINT + CHECKPOINTS_PATH
    datasets_dir: str = MOUNT_POINT + DATASETS_PATH
    command: tuple[str, ...] = ()  # training script and its arguments, as torchrun takes them
    env: Mapping[str, str] = field(default_factory=dict, hash=False)
    # torchrun --nproc-per-node; defaults to devices_per_node. On Neuron, pass one per NeuronCore.
    processes_per_node: int | None = None
    efa_device_rdma: bool = True  # FI_EFA_USE_DEVICE_RDMA=1; every training type supports RDMA read
    # The registry's KMS key ARN. Pass it: with `--sse aws:kms` and no key id, S3 encrypts with the
    # AWS managed key aws/s3, not the registry's key (S3 PutObject docs, SSEKMSKeyId).
    registry_kms_key_id: str | None = None
    rendezvous_timeout_seconds: int = 1800
    # How long rank 0 waits for /fsx/checkpoints to reach the registry before it reports the run.
    export_timeout_seconds: int = EXPORT_WAIT_SECONDS
    # Power the node off when the job ends (the launch template makes that a termination).
    power_off_on_exit: bool = True
    # Whether /fsx/checkpoints is linked to the registry; without it no export is awaited, and the
    # marker's status depends on the exit code alone.
    export_checkpoints: bool = True
    # Unix time at which every node sends SIGTERM to the job's workers (expires-at minus the grace
    # period), so they can save a last checkpoint before the run guard's hard stop; None: never.
    stop_at_epoch: int | None = None
    # Unix time of expires-at: every node schedules its own power-off NODE_BACKSTOP_SECONDS later at
    # boot, a hard cap that holds even if the run guard never runs; None: no backstop.
    expires_at_epoch: int | None = None
    torchrun: str = "torchrun"  # path of torchrun on the AMI

    def __post_init__(self) -> None:
        object.__setattr__(self, "command", tuple(self.command))
        object.__setattr__(self, "env", MappingProxyType(dict(sorted(dict(self.env).items()))))
        problems = _problems(self)
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def nproc_per_node(self) -> int:
        return self.processes_per_node or self.devices_per_node


def render_user_data(spec: NodeBootstrap) -> str:
    """The bootstrap script for every node of the run described by `spec`."""
    q = shlex.quote
    runs = runs_prefix(spec.run_id)  # "runs/<run-id>/", validated against the registry layout
    kms = f" --sse-kms-key-id {q(spec.registry_kms_key_id)}" if spec.registry_kms_key_id else ""
    values = {
        **common_values(spec, f"{spec.lustre_dns_name}@tcp:/{spec.lustre_mount_name}",
                        f"s3://{spec.registry_bucket}/{runs.rstrip('/')}"),
        "EFA_DEVICES": str(spec.efa_devices),
        "REGION": q(spec.registry_region),
        "KMS_ARGS": kms,
        "FABRIC_ENV": _fabric_env(spec),
    }
    return render_script(AWS_PLATFORM, values)


def common_values(spec: Any, lustre_source: str, marker_uri: str) -> dict[str, str]:
    """Values of the shared part of the script, from any bootstrap spec with the shared fields (run_id,
    node_count, nproc_per_node, directories, timeouts, lifecycle epochs, env, torchrun, command)."""
    q = shlex.quote
    runs = runs_prefix(spec.run_id)
    return {
        "RUN_ID": q(spec.run_id),
        "RUN_ID_JSON": q(json.dumps(spec.run_id)),
        "NODE_COUNT": str(spec.node_count),
        "NPROC": str(spec.nproc_per_node),
        "LUSTRE_SOURCE": q(lustre_source),
        "MOUNT_POINT": q(MOUNT_POINT),
        "CHECKPOINTS_DIR": q(spec.checkpoints_dir),
        "DATASETS_DIR": q(spec.datasets_dir),
        "RUN_DIR": q(f"{MOUNT_POINT}/{runs.rstrip('/')}"),
        "MARKER_URI": q(marker_uri),
        "TIMEOUT": str(spec.rendezvous_timeout_seconds),
        "EXPORT_TIMEOUT": str(spec.export_timeout_seconds),
        "POWER_OFF": "1" if spec.power_off_on_exit else "0",
        "POWER_OFF_MINUTES": str(NODE_POWER_OFF_DELAY_SECONDS // 60),
        "EXPORT": "1" if spec.export_checkpoints else "0",
        "STOP_AT": str(spec.stop_at_epoch or 0),
        "EXPIRES_AT": str(spec.expires_at_epoch or 0),
        "BACKSTOP_SECONDS": str(NODE_BACKSTOP_SECONDS),
        "RDZV_PORT": str(RDZV_PORT),
        "USER_ENV": "".join(f"export {k}={q(v)}\n" for k, v in spec.env.items()) or "# (none)\n",
        "TORCHRUN": q(spec.torchrun),
        "COMMAND": " ".join(q(arg) for arg in spec.command),
    }


def _fabric_env(spec: NodeBootstrap) -> str:
    lines = []
    if spec.efa_devices:
        lines += [
            "# libfabric over EFA (aws-ofi-nccl / Neuron collectives pick it up)",
            "export FI_PROVIDER=efa",
            *(["export FI_EFA_USE_DEVICE_RDMA=1"] if spec.efa_device_rdma else []),
            "export FI_EFA_USE_HUGE_PAGE=0",
        ]
    else:
        lines.append("# no EFA devices: collectives use TCP sockets")
    if spec.accelerator_kind == "gpu":
        lines.append("# NCCL: aws-ofi-nccl >= 1.7 with libfabric >= 1.18 needs no NCCL_* tuning")
    else:
        lines += [
            "# Neuron runtime: collectives bootstrap through rank 0; compiled graphs shared on Lustre",
            *(["export FI_EFA_FORK_SAFE=1"] if spec.efa_devices else []),
            f'export NEURON_RT_ROOT_COMM_ID="${{MLINFRA_RENDEZVOUS_HOST}}:{NEURON_ROOT_COMM_PORT}"',
            'export NEURON_COMPILE_CACHE_URL="${MLINFRA_RUN_DIR}/neuron-cache"',
        ]
    return "\n".join(lines) + "\n"


def _problems(spec: NodeBootstrap) -> list[str]:
    problems = common_problems(spec, spec.registry_bucket, "registry_bucket")
    if not _positive_int(spec.devices_per_node):
        problems.append(f"devices_per_node must be a whole number >= 1 (got {spec.devices_per_node!r})")
    if not isinstance(spec.efa_devices, int) or isinstance(spec.efa_devices, bool) or spec.efa_devices < 0:
        problems.append(f"efa_devices must be a whole number >= 0 (got {spec.efa_devices!r})")
    if spec.processes_per_node is not None and not _positive_int(spec.processes_per_node):
        problems.append(f"processes_per_node must be a whole number >= 1 (got {spec.processes_per_node!r})")
    if spec.accelerator_kind not in ("gpu", "neuron"):
        problems.append(f"accelerator_kind must be 'gpu' or 'neuron' (got {spec.accelerator_kind!r})")
    if not is_region_name(spec.registry_region):
        problems.append(
            f"registry_region must be an AWS region name like us-east-1 (got {spec.registry_region!r})"
        )
    for name in ("lustre_dns_name", "lustre_mount_name"):
        if not getattr(spec, name):
            problems.append(f"{name} must not be empty")
    return problems


def common_problems(spec: Any, bucket: str, bucket_field: str) -> list[str]:
    """Checks of the shared fields (see `common_values`); `bucket` is where the markers go (S3 and GCS bucket
    names follow the same rules for what is checked here)."""
    problems = []
    for name in ("node_count", "rendezvous_timeout_seconds", "export_timeout_seconds"):
        value = getattr(spec, name)
        if not _positive_int(value):
            problems.append(f"{name} must be a whole number >= 1 (got {value!r})")
    for name in ("stop_at_epoch", "expires_at_epoch"):
        value = getattr(spec, name)
        if value is not None and not _positive_int(value):
            problems.append(f"{name} must be a Unix time >= 1 (got {value!r})")
    try:
        runs_prefix(spec.run_id)
    except ValueError as err:
        problems.append(f"run_id: {err}")
    if bucket_name_problem(bucket):
        problems.append(f"{bucket_field}: {bucket_name_problem(bucket)}")
    if not spec.torchrun:
        problems.append("torchrun must not be empty")
    for name in ("checkpoints_dir", "datasets_dir"):
        path = getattr(spec, name)
        if not path.startswith(f"{MOUNT_POINT}/") or "/../" in f"{path}/":
            problems.append(f"{name} must be a directory under {MOUNT_POINT}/ (got {path!r})")
    if not spec.command or not all(isinstance(arg, str) for arg in spec.command) or not spec.command[0]:
        problems.append("command must name the training script (and its arguments) as torchrun takes them")
    for key, value in spec.env.items():
        if not isinstance(key, str) or not _ENV_KEY.fullmatch(key):
            problems.append(f"env key {key!r} must be a shell variable name (letters, digits, '_')")
        elif key.startswith("MLINFRA_") or key in _SHELL_OWNED:
            problems.append(f"env key {key!r} is reserved (MLINFRA_* and shell-owned names)")
        if not isinstance(value, str):
            problems.append(f"env value for {key!r} must be a string (got {type(value).__name__})")
    return problems


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1



# The AWS parts of the script (EC2 with EFA and FSx for Lustre linked to the S3 registry).
AWS_PLATFORM = Platform(
    variables_a="MLINFRA_EFA_DEVICES=@@EFA_DEVICES@@\n",
    variables_b="MLINFRA_REGISTRY_REGION=@@REGION@@\n",
    export_functions='# pending_exports: checkpoint files Lustre has not yet exported to the registry (HSM state dirty or\n# not archived); the checkpoints association exports new and changed files asynchronously.\npending_exports() {\n  find "$MLINFRA_CHECKPOINTS_DIR" -type f -print0 2>/dev/null \\\n    | xargs -0 -r lfs hsm_state 2>/dev/null \\\n    | awk \'/dirty/ || !/archived/ {n++} END {print n+0}\'\n}\n\n# wait_for_export: 0 once every checkpoint is in the registry, 1 after MLINFRA_EXPORT_TIMEOUT seconds.\nwait_for_export() {\n  local deadline=$((SECONDS + MLINFRA_EXPORT_TIMEOUT)) pending\n  while :; do\n    pending="$(pending_exports)"\n    if [[ "$pending" == 0 ]]; then return 0; fi\n    if (( SECONDS >= deadline )); then\n      log "${pending} checkpoint files still not exported after ${MLINFRA_EXPORT_TIMEOUT}s"\n      return 1\n    fi\n    sleep 15\n  done\n}\n',
    marker_upload='    | aws s3 cp - "${MLINFRA_MARKER_URI}/_${status}" --sse aws:kms@@KMS_ARGS@@ \\\n        --region "$MLINFRA_REGISTRY_REGION" --content-type application/json --only-show-errors\n',
    devices_check='# ---- EFA: the launch template attached one device per card; all of them must be here ----\nmlinfra_efa_found=0\nif [[ -d /sys/class/infiniband ]]; then\n  mlinfra_efa_found=$(find /sys/class/infiniband -mindepth 1 -maxdepth 1 | wc -l)\nfi\nif (( mlinfra_efa_found < MLINFRA_EFA_DEVICES )); then\n  log "expected ${MLINFRA_EFA_DEVICES} EFA devices, found ${mlinfra_efa_found}: check the launch template\'s network interfaces"\n  exit 1\nfi\n',
    private_ip='imds_token() {\n  curl -sSf -X PUT -H \'X-aws-ec2-metadata-token-ttl-seconds: 300\' http://169.254.169.254/latest/api/token\n}\nmlinfra_token="$(retry 10 3 imds_token)"\nMLINFRA_PRIVATE_IP="$(curl -sSf -H "X-aws-ec2-metadata-token: ${mlinfra_token}" \\\n  http://169.254.169.254/latest/meta-data/local-ipv4)"\n',
    metadata_name="IMDS",
    power_off_means="the launch template turns that into termination",
    power_off_on_exit_note="Shutdown terminates the node (launch template), so billing stops within minutes of the job's end.",
)


def render_script(platform: Platform, values: Mapping[str, str]) -> str:
    """The shared script with `platform`'s parts, then `values` (@@KEY@@ -> value) filled in."""
    script = _TEMPLATE
    for key, part in platform.slots().items():
        script = script.replace(f"@@{key}@@", part)
    for key, value in values.items():
        script = script.replace(f"@@{key}@@", value)
    assert "@@" not in script, script
    return script


_TEMPLATE = r"""#!/bin/bash
# shellcheck disable=SC2016  # values from the run spec are single-quoted literals on purpose
# mlinfra training node bootstrap. Rendered by infra/training/aws/userdata.py; edit that, not this.
# Every node of the run runs this same script and finds its rank through a rendezvous on Lustre.
set -euo pipefail

MLINFRA_RUN_ID=@@RUN_ID@@
MLINFRA_RUN_ID_JSON=@@RUN_ID_JSON@@
MLINFRA_NODE_COUNT=@@NODE_COUNT@@
MLINFRA_NPROC_PER_NODE=@@NPROC@@
@@PLATFORM_VARIABLES_A@@MLINFRA_LUSTRE_SOURCE=@@LUSTRE_SOURCE@@
MLINFRA_MOUNT_POINT=@@MOUNT_POINT@@
MLINFRA_CHECKPOINTS_DIR=@@CHECKPOINTS_DIR@@
MLINFRA_DATASETS_DIR=@@DATASETS_DIR@@
MLINFRA_RUN_DIR=@@RUN_DIR@@
MLINFRA_MARKER_URI=@@MARKER_URI@@
@@PLATFORM_VARIABLES_B@@MLINFRA_RENDEZVOUS_TIMEOUT=@@TIMEOUT@@
MLINFRA_EXPORT_TIMEOUT=@@EXPORT_TIMEOUT@@
MLINFRA_POWER_OFF=@@POWER_OFF@@
MLINFRA_EXPORT=@@EXPORT@@
MLINFRA_STOP_AT=@@STOP_AT@@
MLINFRA_EXPIRES_AT=@@EXPIRES_AT@@
MLINFRA_RDZV_PORT=@@RDZV_PORT@@

MLINFRA_STARTED_AT="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
MLINFRA_NODE_RANK=""
MLINFRA_PRIVATE_IP=""
MLINFRA_HOSTS=()
MLINFRA_JOB_PID=""
MLINFRA_STOPPER_PID=""

log() { printf 'mlinfra %s: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# The node's own hard cap, set first so it holds whatever fails later (the run guard included):
# power off a few minutes after expires-at; @@POWER_OFF_MEANS@@.
if (( MLINFRA_EXPIRES_AT > 0 )); then
  mlinfra_backstop_min=$(( (MLINFRA_EXPIRES_AT + @@BACKSTOP_SECONDS@@ - $(date -u +%s) + 59) / 60 ))
  shutdown -h "+$(( mlinfra_backstop_min > 1 ? mlinfra_backstop_min : 1 ))" "mlinfra: run ${MLINFRA_RUN_ID} expires" \
    || log "could not schedule the expiry power-off"
fi

# retry ATTEMPTS DELAY_SECONDS COMMAND...
retry() {
  local attempts=$1 delay=$2 n=1
  shift 2
  until "$@"; do
    if (( n >= attempts )); then
      log "gave up after ${n} attempts: $*"
      return 1
    fi
    n=$((n + 1))
    sleep "$delay"
  done
}

@@EXPORT_FUNCTIONS@@
# write_marker EXIT_CODE EXPORTED: runs/<run-id>/_SUCCESS or _FAILED in the registry, as JSON.
# _SUCCESS means the job exited 0 AND (when checkpoints are exported) its checkpoints are in the registry.
write_marker() {
  local code=$1 exported=$2 status=SUCCESS rank=null
  if (( code != 0 )) || [[ "$MLINFRA_EXPORT" == 1 && "$exported" != true ]]; then status=FAILED; fi
  if [[ -n "$MLINFRA_NODE_RANK" ]]; then rank=$MLINFRA_NODE_RANK; fi
  printf '{"run_id":%s,"status":"%s","exit_code":%d,"checkpoints_exported":%s,"started_at":"%s","ended_at":"%s","node_count":%d,"rank":%s,"host":"%s"}\n' \
    "$MLINFRA_RUN_ID_JSON" "$status" "$code" "$exported" "$MLINFRA_STARTED_AT" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    "$MLINFRA_NODE_COUNT" "$rank" "$MLINFRA_PRIVATE_IP" \
@@MARKER_UPLOAD@@}

on_exit() {
  local code=$? exported=false
  trap - EXIT
  set +e  # the marker is attempted whatever else has failed
  if [[ -n "$MLINFRA_STOPPER_PID" ]]; then pkill -P "$MLINFRA_STOPPER_PID" 2>/dev/null; kill "$MLINFRA_STOPPER_PID" 2>/dev/null; fi
  if [[ -n "$MLINFRA_JOB_PID" ]]; then kill -TERM "$MLINFRA_JOB_PID" 2>/dev/null && wait "$MLINFRA_JOB_PID"; fi
  if [[ "$MLINFRA_NODE_RANK" == 0 ]] || [[ -z "$MLINFRA_NODE_RANK" && $code -ne 0 ]]; then
    if [[ -n "$MLINFRA_NODE_RANK" && "$MLINFRA_EXPORT" == 1 ]] && wait_for_export; then exported=true; fi
    retry 5 5 write_marker "$code" "$exported" || log "could not write the completion marker under ${MLINFRA_MARKER_URI}"
  fi
  log "exit ${code}"
  if [[ "$MLINFRA_POWER_OFF" == 1 ]]; then
    # @@POWER_OFF_ON_EXIT_NOTE@@
    shutdown -h +@@POWER_OFF_MINUTES@@ "mlinfra: run ${MLINFRA_RUN_ID} ended (exit ${code})"
  fi
  exit "$code"
}
trap on_exit EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# ---- Lustre ----
mount_lustre() {
  mountpoint -q "$MLINFRA_MOUNT_POINT" \
    || mount -t lustre -o relatime,flock "$MLINFRA_LUSTRE_SOURCE" "$MLINFRA_MOUNT_POINT"
}
mkdir -p "$MLINFRA_MOUNT_POINT"
log "mounting ${MLINFRA_LUSTRE_SOURCE} at ${MLINFRA_MOUNT_POINT}"
retry 30 10 mount_lustre

@@DEVICES_CHECK@@
# ---- rendezvous through Lustre: rank = index of this node's IP among the sorted IPs ----
@@PRIVATE_IP@@if [[ ! "$MLINFRA_PRIVATE_IP" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]]; then
  log "@@METADATA_NAME@@ returned no usable private IPv4 address: '${MLINFRA_PRIVATE_IP}'"
  MLINFRA_PRIVATE_IP=""
  exit 1
fi

mlinfra_hosts_dir="${MLINFRA_RUN_DIR}/hosts"
mkdir -p "$mlinfra_hosts_dir" "$MLINFRA_CHECKPOINTS_DIR"
printf '%s\n' "$MLINFRA_PRIVATE_IP" > "${MLINFRA_RUN_DIR}/.${MLINFRA_PRIVATE_IP}.tmp"
mv -f "${MLINFRA_RUN_DIR}/.${MLINFRA_PRIVATE_IP}.tmp" "${mlinfra_hosts_dir}/${MLINFRA_PRIVATE_IP}"
log "waiting for ${MLINFRA_NODE_COUNT} nodes in ${mlinfra_hosts_dir}"
mlinfra_deadline=$((SECONDS + MLINFRA_RENDEZVOUS_TIMEOUT))
while :; do
  mapfile -t MLINFRA_HOSTS < <(find "$mlinfra_hosts_dir" -mindepth 1 -maxdepth 1 -type f -printf '%f\n' | LC_ALL=C sort)
  if (( ${#MLINFRA_HOSTS[@]} >= MLINFRA_NODE_COUNT )); then break; fi
  if (( SECONDS >= mlinfra_deadline )); then
    log "rendezvous timed out after ${MLINFRA_RENDEZVOUS_TIMEOUT}s: ${#MLINFRA_HOSTS[@]} of ${MLINFRA_NODE_COUNT} nodes checked in"
    exit 1
  fi
  sleep 5
done
if (( ${#MLINFRA_HOSTS[@]} > MLINFRA_NODE_COUNT )); then
  log "${#MLINFRA_HOSTS[@]} hosts in ${mlinfra_hosts_dir}, expected ${MLINFRA_NODE_COUNT}: a node was replaced; start the run again with a new run id"
  exit 1
fi
for mlinfra_i in "${!MLINFRA_HOSTS[@]}"; do
  if [[ "${MLINFRA_HOSTS[$mlinfra_i]}" == "$MLINFRA_PRIVATE_IP" ]]; then MLINFRA_NODE_RANK=$mlinfra_i; fi
done
if [[ -z "$MLINFRA_NODE_RANK" ]]; then
  log "this node (${MLINFRA_PRIVATE_IP}) is not among the rendezvous hosts"
  exit 1
fi
MLINFRA_RENDEZVOUS_HOST="${MLINFRA_HOSTS[0]}"
log "node rank ${MLINFRA_NODE_RANK} of ${MLINFRA_NODE_COUNT}; rendezvous host ${MLINFRA_RENDEZVOUS_HOST}"

# ---- job environment ----
export MLINFRA_RUN_ID MLINFRA_NODE_RANK MLINFRA_NODE_COUNT MLINFRA_RENDEZVOUS_HOST MLINFRA_STOP_AT MLINFRA_EXPIRES_AT
export MLINFRA_CHECKPOINTS_DIR MLINFRA_DATASETS_DIR
@@FABRIC_ENV@@# from the run's env (may override the settings above)
@@USER_ENV@@
# ---- the job: same command on every node; checkpoints go to MLINFRA_CHECKPOINTS_DIR ----
mlinfra_command=(@@COMMAND@@)
log "starting torchrun on ${MLINFRA_NPROC_PER_NODE} processes"
@@TORCHRUN@@ \
  --nnodes="$MLINFRA_NODE_COUNT" \
  --nproc-per-node="$MLINFRA_NPROC_PER_NODE" \
  --node-rank="$MLINFRA_NODE_RANK" \
  --rdzv-backend=c10d \
  --rdzv-endpoint="${MLINFRA_RENDEZVOUS_HOST}:${MLINFRA_RDZV_PORT}" \
  --rdzv-id="$MLINFRA_RUN_ID" \
  "${mlinfra_command[@]}" &
MLINFRA_JOB_PID=$!
# The grace period: at MLINFRA_STOP_AT, SIGTERM goes to the workers themselves, not to torchrun (whose
# agent would kill them 30 s later): a job that saves a checkpoint and exits 0 on SIGTERM ends through
# the normal exit (export wait, _SUCCESS marker) before the run guard's hard stop at expires-at.
if (( MLINFRA_STOP_AT > 0 )); then
  mlinfra_stop_in=$(( MLINFRA_STOP_AT - $(date -u +%s) ))
  ( sleep "$(( mlinfra_stop_in > 0 ? mlinfra_stop_in : 0 ))"
    log "expiry grace period reached: asking the workers to save and stop"
    pkill -TERM -P "$MLINFRA_JOB_PID" 2>/dev/null ) &
  MLINFRA_STOPPER_PID=$!
fi
mlinfra_job_code=0
wait "$MLINFRA_JOB_PID" || mlinfra_job_code=$?
MLINFRA_JOB_PID=""
if (( mlinfra_job_code != 0 )); then exit "$mlinfra_job_code"; fi
"""
