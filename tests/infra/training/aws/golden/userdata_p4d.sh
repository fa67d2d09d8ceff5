#!/bin/bash
# shellcheck disable=SC2016  # values from the run spec are single-quoted literals on purpose
# mlinfra training node bootstrap. Rendered by infra/training/bootstrap.py; edit that, not this.
# Every node of the run runs this same script and finds its rank through a rendezvous on Lustre.
set -euo pipefail
# The script's own commands (aws, gcloud, shutdown, mount, curl) come from the system's directories, whatever
# the environment it was started with; the job's env goes to the job alone (see "the job" below).
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/snap/bin
export PATH

MLINFRA_RUN_ID=demo-001
MLINFRA_RUN_ID_JSON='"demo-001"'
MLINFRA_NODE_COUNT=4
MLINFRA_NPROC_PER_NODE=8
MLINFRA_EFA_DEVICES=4
MLINFRA_LUSTRE_SOURCE=fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh
MLINFRA_MOUNT_POINT=/fsx
MLINFRA_CHECKPOINTS_DIR=/fsx/checkpoints
MLINFRA_DATASETS_DIR=/fsx/datasets
MLINFRA_RUN_DIR=/fsx/runs/demo-001
MLINFRA_MARKER_URI=s3://mlinfra-registry-123456789012/runs/demo-001
MLINFRA_REGISTRY_REGION=us-east-1
MLINFRA_RENDEZVOUS_TIMEOUT=1800
MLINFRA_EXPORT_TIMEOUT=3600
MLINFRA_POWER_OFF=1
MLINFRA_EXPORT=1
MLINFRA_STOP_AT=1795334400
MLINFRA_EXPIRES_AT=1795335300
MLINFRA_RDZV_PORT=29500

MLINFRA_STARTED_AT="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
MLINFRA_NODE_RANK=""
MLINFRA_PRIVATE_IP=""
MLINFRA_HOSTS=()
MLINFRA_JOB_PID=""
MLINFRA_STOPPER_PID=""

log() { printf 'mlinfra %s: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# The node's own hard cap, set first so it holds whatever fails later (the run guard included):
# power off a few minutes after expires-at; the launch template turns that into termination.
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

# pending_exports: checkpoint files Lustre has not yet exported to the registry (HSM state dirty or
# not archived); the checkpoints association exports new and changed files asynchronously.
pending_exports() {
  find "$MLINFRA_CHECKPOINTS_DIR" -type f -print0 2>/dev/null \
    | xargs -0 -r lfs hsm_state 2>/dev/null \
    | awk '/dirty/ || !/archived/ {n++} END {print n+0}'
}

# wait_for_export: 0 once every checkpoint is in the registry, 1 after MLINFRA_EXPORT_TIMEOUT seconds.
wait_for_export() {
  local deadline=$((SECONDS + MLINFRA_EXPORT_TIMEOUT)) pending
  while :; do
    pending="$(pending_exports)"
    if [[ "$pending" == 0 ]]; then return 0; fi
    if (( SECONDS >= deadline )); then
      log "${pending} checkpoint files still not exported after ${MLINFRA_EXPORT_TIMEOUT}s"
      return 1
    fi
    sleep 15
  done
}

# write_marker EXIT_CODE EXPORTED: runs/<run-id>/_SUCCESS or _FAILED in the registry, as JSON.
# _SUCCESS means the job exited 0 AND (when checkpoints are exported) its checkpoints are in the registry.
write_marker() {
  local code=$1 exported=$2 status=SUCCESS rank=null
  if (( code != 0 )) || [[ "$MLINFRA_EXPORT" == 1 && "$exported" != true ]]; then status=FAILED; fi
  if [[ -n "$MLINFRA_NODE_RANK" ]]; then rank=$MLINFRA_NODE_RANK; fi
  # expires_at (Unix time, 0: none) names the deployment: a marker counts only for the one that wrote it.
  printf '{"run_id":%s,"status":"%s","exit_code":%d,"checkpoints_exported":%s,"started_at":"%s","ended_at":"%s","node_count":%d,"rank":%s,"host":"%s","expires_at":%d}\n' \
    "$MLINFRA_RUN_ID_JSON" "$status" "$code" "$exported" "$MLINFRA_STARTED_AT" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    "$MLINFRA_NODE_COUNT" "$rank" "$MLINFRA_PRIVATE_IP" "$MLINFRA_EXPIRES_AT" \
    | aws s3 cp - "${MLINFRA_MARKER_URI}/_${status}" --sse aws:kms --sse-kms-key-id arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab \
        --region "$MLINFRA_REGISTRY_REGION" --content-type application/json --only-show-errors
}

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
    # Shutdown terminates the node (launch template), so billing stops within minutes of the job's end.
    shutdown -h +1 "mlinfra: run ${MLINFRA_RUN_ID} ended (exit ${code})"
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

# ---- EFA: the launch template attached one device per card; all of them must be here ----
mlinfra_efa_found=0
if [[ -d /sys/class/infiniband ]]; then
  mlinfra_efa_found=$(find /sys/class/infiniband -mindepth 1 -maxdepth 1 | wc -l)
fi
if (( mlinfra_efa_found < MLINFRA_EFA_DEVICES )); then
  log "expected ${MLINFRA_EFA_DEVICES} EFA devices, found ${mlinfra_efa_found}: check the launch template's network interfaces"
  exit 1
fi

# ---- rendezvous through Lustre: rank = index of this node's IP among the sorted IPs ----
imds_token() {
  curl -sSf -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' http://169.254.169.254/latest/api/token
}
mlinfra_token="$(retry 10 3 imds_token)"
MLINFRA_PRIVATE_IP="$(curl -sSf -H "X-aws-ec2-metadata-token: ${mlinfra_token}" \
  http://169.254.169.254/latest/meta-data/local-ipv4)"
if [[ ! "$MLINFRA_PRIVATE_IP" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]]; then
  log "IMDS returned no usable private IPv4 address: '${MLINFRA_PRIVATE_IP}'"
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
# libfabric over EFA (aws-ofi-nccl / Neuron collectives pick it up)
export FI_PROVIDER=efa
export FI_EFA_USE_DEVICE_RDMA=1
export FI_EFA_USE_HUGE_PAGE=0
# NCCL: aws-ofi-nccl >= 1.7 with libfabric >= 1.18 needs no NCCL_* tuning

# ---- the job: same command on every node; checkpoints go to MLINFRA_CHECKPOINTS_DIR ----
# The run's env, for the job's processes only (it may override the settings above); never this shell's.
mlinfra_job_env=(NCCL_DEBUG=WARN)
mlinfra_command=(/opt/mlinfra/train.py --config configs/llama-8b.yaml --save-every=1000)
log "starting torchrun on ${MLINFRA_NPROC_PER_NODE} processes"
# ${a[@]+"${a[@]}"}: an empty array under `set -u` on bash 4.2 (Amazon Linux 2) is not an error.
env ${mlinfra_job_env[@]+"${mlinfra_job_env[@]}"} torchrun \
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
