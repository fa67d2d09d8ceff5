#!/bin/bash
# shellcheck disable=SC2016  # values from the run spec are single-quoted literals on purpose
# mlinfra training node bootstrap. Rendered by infra/training/bootstrap.py; edit that, not this.
# Every node of the run runs this same script and finds its rank through a rendezvous on Lustre.
set -euo pipefail
# The script's own commands (aws, gcloud, shutdown, mount, curl) come from the system's directories, whatever
# the environment it was started with; the job's env goes to the job alone (see "the job" below).
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/snap/bin
export PATH

MLINFRA_RUN_ID=@@RUN_ID@@
MLINFRA_RUN_ID_JSON=@@RUN_ID_JSON@@
MLINFRA_NODE_COUNT=@@NODE_COUNT@@
MLINFRA_NPROC_PER_NODE=@@NPROC@@
# The launch generation: what replaces every node when it changes (the fleet's type, size, zone, capacity).
# Each generation meets in its own directory, so the addresses of nodes that were replaced never count.
MLINFRA_GENERATION=@@GENERATION@@
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
MLINFRA_TORCHRUN=@@TORCHRUN@@
MLINFRA_STATE_DIR=/var/lib/mlinfra
# A registration counts while its node keeps touching it: a node that died without leaving stops counting.
MLINFRA_HEARTBEAT_SECONDS=@@HEARTBEAT_SECONDS@@
MLINFRA_HOST_STALE_SECONDS=@@HOST_STALE_SECONDS@@

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

@@EXPORT_FUNCTIONS@@
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
@@MARKER_UPLOAD@@}

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
    # @@POWER_OFF_ON_EXIT_NOTE@@
    shutdown -h +@@POWER_OFF_MINUTES@@ "mlinfra: run ${MLINFRA_RUN_ID} ended (exit ${code})"
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
@@NODE_CHECKS@@require_command "torchrun (set job.torchrunPath for another image)" "$MLINFRA_TORCHRUN"

# ---- Lustre ----
mount_lustre() {
  mountpoint -q "$MLINFRA_MOUNT_POINT" \
    || mount -t lustre -o relatime,flock "$MLINFRA_LUSTRE_SOURCE" "$MLINFRA_MOUNT_POINT"
}
mkdir -p "$MLINFRA_MOUNT_POINT" "$MLINFRA_STATE_DIR"
log "mounting ${MLINFRA_LUSTRE_SOURCE} at ${MLINFRA_MOUNT_POINT}"
retry 30 10 mount_lustre || fail "could not mount Lustre ${MLINFRA_LUSTRE_SOURCE} at ${MLINFRA_MOUNT_POINT}"

@@DEVICES_CHECK@@
# ---- rendezvous through Lustre: rank = index of this node's IP among the generation's sorted IPs ----
@@PRIVATE_IP@@if [[ ! "$MLINFRA_PRIVATE_IP" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]]; then
  mlinfra_bad_ip=$MLINFRA_PRIVATE_IP
  MLINFRA_PRIVATE_IP=""
  fail "@@METADATA_NAME@@ returned no usable private IPv4 address: '${mlinfra_bad_ip}'"
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
@@FABRIC_ENV@@
@@FABRIC_GATE@@
# ---- the job: same command on every node; checkpoints go to MLINFRA_CHECKPOINTS_DIR ----
# The run's env, for the job's processes only (it may override the settings above); never this shell's.
mlinfra_job_env=(@@JOB_ENV@@)
mlinfra_command=(@@COMMAND@@)
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
