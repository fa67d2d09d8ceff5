#!/bin/bash
# shellcheck disable=SC2016  # values from the run spec are single-quoted literals on purpose
# mlinfra training node bootstrap. Rendered by infra/training/bootstrap.py; edit that, not this.
# Every node of the run runs this same script and finds its rank through a rendezvous on Lustre.
set -euo pipefail
# The script's own commands (aws, gcloud, shutdown, mount, curl) come from the system's directories, whatever
# the environment it was started with; the job's env goes to the job alone (see "the job" below).
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/snap/bin
export PATH

MLINFRA_RUN_ID=demo-llama-7b-gcp-001
MLINFRA_RUN_ID_JSON='"demo-llama-7b-gcp-001"'
MLINFRA_NODE_COUNT=2
MLINFRA_NPROC_PER_NODE=8
# The launch generation: what replaces every node when it changes (the fleet's type, size, zone, capacity).
# Each generation meets in its own directory, so the addresses of nodes that were replaced never count.
MLINFRA_GENERATION=a3-highgpu-8g-x2-us-central1-a
MLINFRA_GPU_NICS=4
MLINFRA_LUSTRE_SOURCE=192.0.2.20@tcp:/mlinfra
MLINFRA_MOUNT_POINT=/fsx
MLINFRA_CHECKPOINTS_DIR=/fsx/checkpoints
MLINFRA_DATASETS_DIR=/fsx/datasets
MLINFRA_RUN_DIR=/fsx/runs/demo-llama-7b-gcp-001
MLINFRA_MARKER_URI=gs://mlinfra-training-demo/runs/demo-llama-7b-gcp-001
MLINFRA_CHECKPOINTS_URI=gs://mlinfra-training-demo/checkpoints/demo-llama-7b-gcp-001
MLINFRA_RENDEZVOUS_TIMEOUT=1800
MLINFRA_EXPORT_TIMEOUT=3600
MLINFRA_POWER_OFF=1
MLINFRA_EXPORT=1
MLINFRA_STOP_AT=1795334400
MLINFRA_EXPIRES_AT=1795335300
MLINFRA_RDZV_PORT=29500
MLINFRA_TORCHRUN=torchrun
MLINFRA_STATE_DIR=/var/lib/mlinfra
# A registration counts while its node keeps touching it: a node that died without leaving stops counting.
MLINFRA_HEARTBEAT_SECONDS=10
MLINFRA_HOST_STALE_SECONDS=120

MLINFRA_STARTED_AT="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
MLINFRA_NODE_RANK=""
MLINFRA_PRIVATE_IP=""
MLINFRA_HOSTS=()
MLINFRA_HOST_FILE=""
MLINFRA_JOB_PID=""
MLINFRA_STOPPER_PID=""
MLINFRA_HEARTBEAT_PID=""
MLINFRA_REASON=""
MLINFRA_TERMINATED=0

log() { printf 'mlinfra %s: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
# fail REASON: end the run here, with REASON in the _FAILED marker (call it from the script's top level).
fail() {
  MLINFRA_REASON="$*"
  log "$*"
  exit 1
}

# The node's own hard cap, set first so it holds whatever fails later (the run guard included):
# power off a few minutes after expires-at; that stops the VM (its GPUs and vCPUs stop billing); the teardown deletes it.
if (( MLINFRA_EXPIRES_AT > 0 )); then
  mlinfra_backstop_min=$(( (MLINFRA_EXPIRES_AT + 300 - $(date -u +%s) + 59) / 60 ))
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

# json_string TEXT: TEXT as a JSON string literal.
json_string() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\r'/\\r}
  s=${s//$'\t'/\\t}
  printf '"%s"' "$s"
}

# wait_for_export: copy every checkpoint file to the bucket (Managed Lustre is not linked to it); 0 once
# `gcloud storage cp` has copied them all (it exits non-zero if any file failed), 1 on any failure (the files
# cannot even be listed, included) or after MLINFRA_EXPORT_TIMEOUT seconds.
wait_for_export() {
  local files
  files="$(find "$MLINFRA_CHECKPOINTS_DIR" -type f -printf x | wc -c)" \
    || { log "could not list the checkpoints in ${MLINFRA_CHECKPOINTS_DIR}"; return 1; }
  if (( files == 0 )); then log "no checkpoint files to export"; return 0; fi
  timeout "$MLINFRA_EXPORT_TIMEOUT" gcloud storage cp --recursive "${MLINFRA_CHECKPOINTS_DIR}/*" \
    "${MLINFRA_CHECKPOINTS_URI}/" --no-user-output-enabled \
    || { log "checkpoints (${files} files) not copied to ${MLINFRA_CHECKPOINTS_URI} within ${MLINFRA_EXPORT_TIMEOUT}s"; return 1; }
  log "checkpoints exported: ${files} files copied to ${MLINFRA_CHECKPOINTS_URI}"
}

# write_marker EXIT_CODE EXPORTED: runs/<run-id>/_SUCCESS or _FAILED in the registry, as JSON.
# _SUCCESS means the job exited 0 AND (when checkpoints are exported) its checkpoints are in the registry.
write_marker() {
  local code=$1 exported=$2 status=SUCCESS rank=null
  if (( code != 0 )) || [[ "$MLINFRA_EXPORT" == 1 && "$exported" != true ]]; then status=FAILED; fi
  if [[ -n "$MLINFRA_NODE_RANK" ]]; then rank=$MLINFRA_NODE_RANK; fi
  # expires_at (Unix time, 0: none) names the deployment: a marker counts only for the one that wrote it.
  printf '{"run_id":%s,"status":"%s","exit_code":%d,"checkpoints_exported":%s,"started_at":"%s","ended_at":"%s","node_count":%d,"rank":%s,"host":"%s","expires_at":%d,"generation":%s,"reason":%s}\n' \
    "$MLINFRA_RUN_ID_JSON" "$status" "$code" "$exported" "$MLINFRA_STARTED_AT" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    "$MLINFRA_NODE_COUNT" "$rank" "$MLINFRA_PRIVATE_IP" "$MLINFRA_EXPIRES_AT" \
    "$(json_string "$MLINFRA_GENERATION")" "$(json_string "$MLINFRA_REASON")" \
    | gcloud storage cp - "${MLINFRA_MARKER_URI}/_${status}" --content-type=application/json \
        --no-user-output-enabled
}

on_exit() {
  local code=$? exported=false pid
  trap - EXIT
  set +e  # the marker is attempted whatever else has failed
  for pid in "$MLINFRA_STOPPER_PID" "$MLINFRA_HEARTBEAT_PID"; do
    if [[ -n "$pid" ]]; then pkill -P "$pid" 2>/dev/null; kill "$pid" 2>/dev/null; fi
  done
  if [[ -n "$MLINFRA_JOB_PID" ]]; then kill -TERM "$MLINFRA_JOB_PID" 2>/dev/null && wait "$MLINFRA_JOB_PID"; fi
  # A node that is being terminated, or leaves before its rendezvous formed, leaves the rendezvous, so a later
  # launch of the same generation does not count it. One that ends on its own after the rendezvous stays listed
  # (nodes still looking must see every node that formed it) and goes stale once its heartbeat has stopped.
  if [[ -n "$MLINFRA_HOST_FILE" ]] && { (( MLINFRA_TERMINATED )) || [[ -z "$MLINFRA_NODE_RANK" ]]; }; then
    rm -f "$MLINFRA_HOST_FILE"
  fi
  if (( MLINFRA_TERMINATED )); then
    # What stops the instance (teardown, the run guard, a fleet replacement, the end of its capacity) owns the
    # run's end: a marker from here would end a replacement generation's run too.
    log "terminated from outside: no completion marker from this node"
  elif [[ "$MLINFRA_NODE_RANK" == 0 ]] || [[ -z "$MLINFRA_NODE_RANK" && $code -ne 0 ]]; then
    if [[ -n "$MLINFRA_NODE_RANK" && "$MLINFRA_EXPORT" == 1 ]] && wait_for_export; then exported=true; fi
    retry 5 5 write_marker "$code" "$exported" || log "could not write the completion marker under ${MLINFRA_MARKER_URI}"
  fi
  log "exit ${code}"
  if [[ "$MLINFRA_POWER_OFF" == 1 ]]; then
    # Shutdown stops the VM, so GPU and vCPU billing stop within minutes of the job's end.
    shutdown -h +1 "mlinfra: run ${MLINFRA_RUN_ID} ended (exit ${code})"
  fi
  exit "$code"
}
trap on_exit EXIT
trap 'MLINFRA_TERMINATED=1; exit 143' TERM
trap 'exit 130' INT

# ---- the image: what this script relies on is checked before anything else runs ----
# require_command WHAT COMMAND / require_ok WHAT COMMAND... / find_library VAR WHAT CANDIDATE...
require_command() {
  command -v "$2" >/dev/null 2>&1 || fail "the node image lacks $1: no '$2' on PATH ($PATH)"
}
require_ok() {
  local what=$1
  shift
  "$@" >/dev/null 2>&1 || fail "the node image lacks $what: '$*' failed"
}
find_library() {
  local var=$1 what=$2 candidate
  shift 2
  for candidate in "$@"; do
    if [[ -f "$candidate" ]]; then
      printf -v "$var" '%s' "$candidate"
      return 0
    fi
  done
  fail "the node image lacks $what: none of $*"
}
# the image named by `image` (GCP): gcloud, the Lustre client and the GPU NICs' NCCL plugin
require_command 'the Google Cloud CLI (writes the completion marker)' gcloud
require_command 'the Lustre client (mounts Managed Lustre)' mount.lustre
find_library MLINFRA_NCCL_NET_PLUGIN 'the GPUDirect-TCPX NCCL plugin' /var/lib/tcpx/lib64/libnccl-net.so
require_command "torchrun (set job.torchrunPath for another image)" "$MLINFRA_TORCHRUN"

# ---- Lustre ----
mount_lustre() {
  mountpoint -q "$MLINFRA_MOUNT_POINT" \
    || mount -t lustre -o relatime,flock "$MLINFRA_LUSTRE_SOURCE" "$MLINFRA_MOUNT_POINT"
}
mkdir -p "$MLINFRA_MOUNT_POINT" "$MLINFRA_STATE_DIR"
log "mounting ${MLINFRA_LUSTRE_SOURCE} at ${MLINFRA_MOUNT_POINT}"
retry 30 10 mount_lustre || fail "could not mount Lustre ${MLINFRA_LUSTRE_SOURCE} at ${MLINFRA_MOUNT_POINT}"

# ---- GPU NICs: nic0 plus one NIC per GPU NIC (each in its own VPC); all of them must be here ----
mlinfra_nics_found=$(find /sys/class/net -mindepth 1 -maxdepth 1 -exec test -e '{}/device' ';' -print | wc -l)
if (( mlinfra_nics_found < MLINFRA_GPU_NICS + 1 )); then
  fail "expected $((MLINFRA_GPU_NICS + 1)) NICs (nic0 and ${MLINFRA_GPU_NICS} GPU NICs), found ${mlinfra_nics_found}: check the instance's network interfaces"
fi

# ---- rendezvous through Lustre: rank = index of this node's IP among the generation's sorted IPs ----
mlinfra_metadata_ip() {
  curl -sSf -H 'Metadata-Flavor: Google' \
    http://metadata.google.internal/computeMetadata/v1/instance/network-interfaces/0/ip
}
MLINFRA_PRIVATE_IP="$(retry 10 3 mlinfra_metadata_ip)" || fail "the metadata server gave no private IPv4 address"
if [[ ! "$MLINFRA_PRIVATE_IP" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]]; then
  mlinfra_bad_ip=$MLINFRA_PRIVATE_IP
  MLINFRA_PRIVATE_IP=""
  fail "the metadata server returned no usable private IPv4 address: '${mlinfra_bad_ip}'"
fi

mlinfra_hosts_dir="${MLINFRA_RUN_DIR}/hosts/${MLINFRA_GENERATION}"
mkdir -p "$mlinfra_hosts_dir" "$MLINFRA_CHECKPOINTS_DIR"
printf '%s\n' "$MLINFRA_PRIVATE_IP" > "${mlinfra_hosts_dir}/.${MLINFRA_PRIVATE_IP}.tmp"
mv -f "${mlinfra_hosts_dir}/.${MLINFRA_PRIVATE_IP}.tmp" "${mlinfra_hosts_dir}/${MLINFRA_PRIVATE_IP}"
MLINFRA_HOST_FILE="${mlinfra_hosts_dir}/${MLINFRA_PRIVATE_IP}"
( while sleep "$MLINFRA_HEARTBEAT_SECONDS"; do touch "$MLINFRA_HOST_FILE" 2>/dev/null; done ) &
MLINFRA_HEARTBEAT_PID=$!
# live_hosts: the generation's registrations touched within MLINFRA_HOST_STALE_SECONDS, in byte order.
live_hosts() {
  find "$mlinfra_hosts_dir" -mindepth 1 -maxdepth 1 -type f -name '[0-9]*' \
    -newermt "@$(( $(date -u +%s) - MLINFRA_HOST_STALE_SECONDS ))" -printf '%f\n' | LC_ALL=C sort
}
log "waiting for ${MLINFRA_NODE_COUNT} nodes in ${mlinfra_hosts_dir}"
mlinfra_deadline=$((SECONDS + MLINFRA_RENDEZVOUS_TIMEOUT))
while :; do
  mapfile -t MLINFRA_HOSTS < <(live_hosts)
  if (( ${#MLINFRA_HOSTS[@]} >= MLINFRA_NODE_COUNT )); then break; fi
  if (( SECONDS >= mlinfra_deadline )); then
    fail "rendezvous timed out after ${MLINFRA_RENDEZVOUS_TIMEOUT}s: ${#MLINFRA_HOSTS[@]} of ${MLINFRA_NODE_COUNT} nodes of generation ${MLINFRA_GENERATION} checked in"
  fi
  sleep 5
done
if (( ${#MLINFRA_HOSTS[@]} > MLINFRA_NODE_COUNT )); then
  fail "${#MLINFRA_HOSTS[@]} live nodes in ${mlinfra_hosts_dir}, expected ${MLINFRA_NODE_COUNT}: more nodes run this generation than it launched"
fi
for mlinfra_i in "${!MLINFRA_HOSTS[@]}"; do
  if [[ "${MLINFRA_HOSTS[$mlinfra_i]}" == "$MLINFRA_PRIVATE_IP" ]]; then MLINFRA_NODE_RANK=$mlinfra_i; fi
done
if [[ -z "$MLINFRA_NODE_RANK" ]]; then
  fail "this node (${MLINFRA_PRIVATE_IP}) is not among the rendezvous hosts"
fi
MLINFRA_RENDEZVOUS_HOST="${MLINFRA_HOSTS[0]}"
log "node rank ${MLINFRA_NODE_RANK} of ${MLINFRA_NODE_COUNT}; rank 0 (master) ${MLINFRA_RENDEZVOUS_HOST}"
# torchrun's static rendezvous: this script already knows every rank and rank 0's address, so torchrun's
# ranks are these ranks (c10d would assign its own, and rank 0 could be another node than the one named here).
mlinfra_static_rdzv=(
  --nnodes="$MLINFRA_NODE_COUNT"
  --nproc-per-node="$MLINFRA_NPROC_PER_NODE"
  --node-rank="$MLINFRA_NODE_RANK"
  --rdzv-backend=static
  --master-addr="$MLINFRA_RENDEZVOUS_HOST"
)

# ---- job environment ----
export MLINFRA_RUN_ID MLINFRA_NODE_RANK MLINFRA_NODE_COUNT MLINFRA_RENDEZVOUS_HOST MLINFRA_STOP_AT MLINFRA_EXPIRES_AT
export MLINFRA_CHECKPOINTS_DIR MLINFRA_DATASETS_DIR MLINFRA_GENERATION
# ---- GPU NICs for NCCL: nic0 carries NCCL's bootstrap, the GPU NICs its data ----
# Interfaces are found by their addresses (nic0: this node's IP; each GPU NIC: its GPU VPC's subnet), not by
# the names the image's kernel gives them.
mlinfra_ip_to_int() {
  local IFS=. a b c d
  read -r a b c d <<<"$1"
  echo $(( (a << 24) | (b << 16) | (c << 8) | d ))
}
# mlinfra_nic_of CIDR_OR_IP: the interface whose IPv4 address is in CIDR (or is IP).
mlinfra_nic_of() {
  local name addr net bits
  while read -r _ name _ addr _; do
    addr=${addr%/*}
    if [[ "$1" == */* ]]; then
      net=$(mlinfra_ip_to_int "${1%/*}") bits=${1#*/}
      if (( ($(mlinfra_ip_to_int "$addr") ^ net) >> (32 - bits) == 0 )); then echo "$name"; return 0; fi
    elif [[ "$addr" == "$1" ]]; then
      echo "$name"
      return 0
    fi
  done < <(ip -o -4 addr show)
  return 1
}
MLINFRA_NIC0="$(mlinfra_nic_of "$MLINFRA_PRIVATE_IP")" || fail "no network interface holds this node's address ${MLINFRA_PRIVATE_IP}"
mlinfra_gpu_nics=()
for mlinfra_cidr in 10.128.0.0/20 10.128.16.0/20 10.128.32.0/20 10.128.48.0/20; do
  mlinfra_nic="$(mlinfra_nic_of "$mlinfra_cidr")" || fail "no network interface on the GPU subnet ${mlinfra_cidr}"
  mlinfra_gpu_nics+=("$mlinfra_nic")
done
mlinfra_gpu_nic_list="$(IFS=,; echo "${mlinfra_gpu_nics[*]}")"
log "NCCL interfaces: ${MLINFRA_NIC0} (bootstrap), ${mlinfra_gpu_nic_list} (GPU NICs)"
# ---- GPUDirect-TCPX (a3-highgpu-8g), as Google's A3 recipe sets it (infra/catalog/data/fabric.json) ----
# NCCL_NET=GPUDirectTCPX_v7: NCCL uses the TCPX plugin or fails, never its own sockets on nic0.
if [[ ! -d /run/tcpx ]]; then
  fail "GPUDirect-TCPX's receive-datapath manager is not running (no /run/tcpx): the image must start Google's tcpgpudmarxd before the job"
fi
export LD_LIBRARY_PATH=/var/lib/tcpx/lib64"${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
export NCCL_NET=GPUDirectTCPX_v7
export NCCL_SOCKET_IFNAME="$MLINFRA_NIC0"
export NCCL_GPUDIRECTTCPX_CTRL_DEV="$MLINFRA_NIC0"
export NCCL_GPUDIRECTTCPX_SOCKET_IFNAME="$mlinfra_gpu_nic_list"
export NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX=/run/tcpx
export NCCL_CROSS_NIC=0
export NCCL_ALGO=Ring
export NCCL_PROTO=Simple
export NCCL_NSOCKS_PERTHREAD=4
export NCCL_SOCKET_NTHREADS=1
export NCCL_DYNAMIC_CHUNK_SIZE=524288
export NCCL_P2P_NET_CHUNKSIZE=524288
export NCCL_P2P_PCI_CHUNKSIZE=524288
export NCCL_P2P_NVL_CHUNKSIZE=1048576
export NCCL_BUFFSIZE=4194304
export NCCL_NET_GDR_LEVEL=PIX
export NCCL_P2P_PXN_LEVEL=0
export NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS=500000
mlinfra_tx_cpus=("8-21,112-125" "8-21,112-125" "60-73,164-177" "60-73,164-177")
mlinfra_rx_cpus=("22-35,126-139" "22-35,126-139" "74-87,178-191" "74-87,178-191")
NCCL_GPUDIRECTTCPX_TX_BINDINGS="" NCCL_GPUDIRECTTCPX_RX_BINDINGS=""
for mlinfra_i in "${!mlinfra_gpu_nics[@]}"; do
  NCCL_GPUDIRECTTCPX_TX_BINDINGS+="${NCCL_GPUDIRECTTCPX_TX_BINDINGS:+;}${mlinfra_gpu_nics[$mlinfra_i]}:${mlinfra_tx_cpus[$mlinfra_i]}"
  NCCL_GPUDIRECTTCPX_RX_BINDINGS+="${NCCL_GPUDIRECTTCPX_RX_BINDINGS:+;}${mlinfra_gpu_nics[$mlinfra_i]}:${mlinfra_rx_cpus[$mlinfra_i]}"
done
export NCCL_GPUDIRECTTCPX_TX_BINDINGS NCCL_GPUDIRECTTCPX_RX_BINDINGS

# ---- the fabric gate: an all-reduce across every node before the job (infra/training/fabric_check.py) ----
# torchrun runs it with the job's static rendezvous (on the next port) and the fabric settings above. Below
# 25 GB/s of bus bandwidth, or with no collectives across the nodes at all, the run fails here: the
# _FAILED marker's reason carries the figure and the floor.
MLINFRA_FABRIC_RESULT="${MLINFRA_STATE_DIR}/fabric-result.txt"
rm -f "$MLINFRA_FABRIC_RESULT"
cat > "${MLINFRA_STATE_DIR}/fabric_check.py" <<'MLINFRA_FABRIC_CHECK'
"""The fabric gate: a short all-reduce across every rank of a run, before its job, that fails below a floor.

The node bootstrap writes this file on every node and runs it with torchrun and the job's own static
rendezvous, so it exercises the same fabric, plugin and environment the job will use. Bus bandwidth is what
nccl-tests reports for all-reduce: algbw = bytes / time, busbw = algbw * 2 * (n - 1) / n (GB/s, 1e9 bytes),
over 5 warm-up and 20 timed iterations, with the slowest rank's time. Below `--min-busbw` the check fails.

Standard library and torch only: it runs on the node's image, not in mlinfra's environment. Every rank exits
with the same code (0 passed, 2 below the floor, 3 could not run collectives at all), and the first process
on each node writes one line for the bootstrap (`--result`): what was measured, against which floor.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import timedelta

PASSED, BELOW_FLOOR, NO_COLLECTIVES = 0, 2, 3
BACKENDS = ("nccl", "xla", "gloo")  # GPUs, Trainium (torch-neuronx), CPU (this program's own tests)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=BACKENDS, required=True)
    parser.add_argument("--bytes", type=int, required=True, help="message size of each all-reduce, bytes")
    parser.add_argument("--min-busbw", type=float, required=True, help="floor, GB/s")
    parser.add_argument("--result", required=True, help="file the node's first process writes its verdict to")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--timeout", type=int, default=600, help="seconds a collective may take")
    args = parser.parse_args(argv)
    if args.bytes < 4 or args.iters < 1 or args.warmup < 0 or args.min_busbw < 0:
        parser.error("--bytes must be >= 4, --iters >= 1, --warmup >= 0, --min-busbw >= 0")
    return args


def bus_bandwidth(nbytes: int, seconds: float, world: int) -> float:
    """nccl-tests' all-reduce bus bandwidth in GB/s (0 for a single rank, which moves nothing)."""
    if world < 2 or seconds <= 0:
        return 0.0
    return nbytes / seconds / 1e9 * 2 * (world - 1) / world


def verdict(busbw: float, floor: float, world: int, nbytes: int, seconds: float) -> tuple[int, str]:
    measured = (
        f"all-reduce bus bandwidth {busbw:.2f} GB/s across {world} ranks "
        f"({nbytes} bytes, {seconds * 1e3:.2f} ms per all-reduce)"
    )
    if busbw >= floor:
        return PASSED, f"{measured}, at or above the floor of {floor:g} GB/s"
    return BELOW_FLOOR, (
        f"{measured}, below the floor of {floor:g} GB/s: collectives are not using the fabric as they should "
        "(see the node's log for NCCL's network and plugin lines)"
    )


def write_result(path: str, line: str) -> None:
    if os.environ.get("LOCAL_RANK", "0") != "0":
        return
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(line.replace("\n", " ") + "\n")
    os.replace(tmp, path)


def measure(args: argparse.Namespace) -> tuple[int, float]:
    """(world size, the slowest rank's seconds per all-reduce), after joining the process group."""
    import torch
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    timeout = timedelta(seconds=args.timeout)
    if args.backend == "xla":
        import torch_xla.core.xla_model as xm  # torch-neuronx's XLA (on the Neuron image only)
        import torch_xla.distributed.xla_backend  # noqa: F401  registers the "xla" backend

        dist.init_process_group("xla", init_method="xla://", timeout=timeout)
        device = xm.xla_device()

        def sync() -> None:
            xm.mark_step()
            xm.wait_device_ops()

    elif args.backend == "nccl":
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", timeout=timeout, device_id=torch.device("cuda", local_rank))
        device = torch.device("cuda", local_rank)

        def sync() -> None:
            torch.cuda.synchronize(device)

    else:
        dist.init_process_group("gloo", timeout=timeout)
        device = torch.device("cpu")

        def sync() -> None:
            return None

    world = dist.get_world_size()
    data = torch.ones(args.bytes // 4, dtype=torch.float32, device=device)
    for _ in range(args.warmup):
        dist.all_reduce(data)
    sync()
    dist.barrier()
    started = time.perf_counter()
    for _ in range(args.iters):
        dist.all_reduce(data)
    sync()
    seconds = torch.tensor([(time.perf_counter() - started) / args.iters], dtype=torch.float64, device=device)
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)  # every rank judges by the slowest one
    sync()
    slowest = float(seconds.cpu().item())
    dist.destroy_process_group()
    return world, slowest


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    nbytes = args.bytes // 4 * 4
    try:
        world, seconds = measure(args)
    except Exception as error:  # any failure to run collectives is the gate's answer, not a traceback
        reason = f"no all-reduce across the nodes ({args.backend}): {type(error).__name__}: {error}"
        write_result(args.result, reason[:2000])
        print(f"mlinfra fabric check: {reason}", file=sys.stderr)
        return NO_COLLECTIVES
    code, line = verdict(bus_bandwidth(nbytes, seconds, world), args.min_busbw, world, nbytes, seconds)
    write_result(args.result, line)
    print(f"mlinfra fabric check: {line}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
MLINFRA_FABRIC_CHECK
log "fabric gate: all-reduce of 1073741824 bytes across ${MLINFRA_NODE_COUNT} nodes, floor 25 GB/s"
mlinfra_fabric_code=0
timeout 900 "$MLINFRA_TORCHRUN" "${mlinfra_static_rdzv[@]}" --master-port="$((MLINFRA_RDZV_PORT + 1))" \
  "${MLINFRA_STATE_DIR}/fabric_check.py" --backend nccl --bytes 1073741824 --min-busbw 25 \
  --timeout 840 --result "$MLINFRA_FABRIC_RESULT" || mlinfra_fabric_code=$?
mlinfra_fabric_line=""
if [[ -s "$MLINFRA_FABRIC_RESULT" ]]; then mlinfra_fabric_line="$(head -n 1 "$MLINFRA_FABRIC_RESULT")"; fi
if (( mlinfra_fabric_code != 0 )); then
  fail "fabric gate failed (exit ${mlinfra_fabric_code}): ${mlinfra_fabric_line:-no result within 900s: a node could not start the check or join its collectives}"
fi
log "fabric gate passed: ${mlinfra_fabric_line}"

# ---- the job: same command on every node; checkpoints go to MLINFRA_CHECKPOINTS_DIR ----
# The run's env, for the job's processes only (it may override the settings above); never this shell's.
mlinfra_job_env=()
mlinfra_command=(/fsx/datasets/code/train.py --config /fsx/datasets/code/llama-7b.yaml)
log "starting torchrun on ${MLINFRA_NPROC_PER_NODE} processes"
# ${a[@]+"${a[@]}"}: an empty array under `set -u` on bash 4.2 (Amazon Linux 2) is not an error.
env ${mlinfra_job_env[@]+"${mlinfra_job_env[@]}"} "$MLINFRA_TORCHRUN" "${mlinfra_static_rdzv[@]}" \
  --master-port="$MLINFRA_RDZV_PORT" \
  "${mlinfra_command[@]}" &
MLINFRA_JOB_PID=$!
# The grace period: at MLINFRA_STOP_AT, SIGTERM goes to the workers themselves, not to torchrun (whose
# agent would kill them 30 s later): a job that saves a checkpoint and exits 0 on SIGTERM ends through
# the normal exit (export wait, _SUCCESS marker) before the run guard's hard stop at expires-at.
if (( MLINFRA_STOP_AT > 0 )); then
  mlinfra_stop_in=$(( MLINFRA_STOP_AT - $(date -u +%s) ))
  # A node that reaches the grace point before torchrun has started its workers (a slow start, a late
  # replacement) has nobody to signal yet: ask again each second until a worker gets it or the job has ended.
  ( sleep "$(( mlinfra_stop_in > 0 ? mlinfra_stop_in : 0 ))"
    log "expiry grace period reached: asking the workers to save and stop"
    until pkill -TERM -P "$MLINFRA_JOB_PID" 2>/dev/null; do
      kill -0 "$MLINFRA_JOB_PID" 2>/dev/null || break
      sleep 1
    done ) &
  MLINFRA_STOPPER_PID=$!
fi
mlinfra_job_code=0
wait "$MLINFRA_JOB_PID" || mlinfra_job_code=$?
MLINFRA_JOB_PID=""
if (( mlinfra_job_code != 0 )); then
  MLINFRA_REASON="the job exited ${mlinfra_job_code}"
  exit "$mlinfra_job_code"
fi
