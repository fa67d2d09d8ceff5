# The AWS parts of the training node bootstrap: EFA devices, IMDSv2, FSx for Lustre's export to S3.
# Sections of the node bootstrap (infra/training/bootstrap.sh), filled into its @@SLOT@@ markers by
# infra/training/bootstrap.py; each section runs from its marker line to the next.
# ==== variables_a ====
MLINFRA_EFA_DEVICES=@@EFA_DEVICES@@
# ==== variables_b ====
MLINFRA_REGISTRY_REGION=@@REGION@@
# ==== export_functions ====
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
# ==== marker_upload ====
    | aws s3 cp - "${MLINFRA_MARKER_URI}/_${status}" --sse aws:kms@@KMS_ARGS@@ \
        --region "$MLINFRA_REGISTRY_REGION" --content-type application/json --only-show-errors
# ==== devices_check ====
# ---- EFA: the launch template attached one device per card; all of them must be here ----
mlinfra_efa_found=0
if [[ -d /sys/class/infiniband ]]; then
  mlinfra_efa_found=$(find /sys/class/infiniband -mindepth 1 -maxdepth 1 | wc -l)
fi
if (( mlinfra_efa_found < MLINFRA_EFA_DEVICES )); then
  log "expected ${MLINFRA_EFA_DEVICES} EFA devices, found ${mlinfra_efa_found}: check the launch template's network interfaces"
  exit 1
fi
# ==== private_ip ====
imds_token() {
  curl -sSf -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' http://169.254.169.254/latest/api/token
}
mlinfra_token="$(retry 10 3 imds_token)"
MLINFRA_PRIVATE_IP="$(curl -sSf -H "X-aws-ec2-metadata-token: ${mlinfra_token}" \
  http://169.254.169.254/latest/meta-data/local-ipv4)"
