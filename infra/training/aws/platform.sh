# The AWS parts of the training node bootstrap: EFA devices, IMDSv2, FSx for Lustre's export to S3.
# Sections of the node bootstrap (infra/training/bootstrap.sh), filled into its @@SLOT@@ markers by
# infra/training/bootstrap.py; each section runs from its marker line to the next.
# ==== variables_a ====
MLINFRA_EFA_DEVICES=@@EFA_DEVICES@@
# ==== variables_b ====
MLINFRA_REGISTRY_REGION=@@REGION@@
# ==== export_functions ====
# export_state: "<files> <exported>" for the checkpoint files, from Lustre's HSM state (lfs hsm_state prints
# "<path>: (0x<flags>) <words>"; exported = HS_ARCHIVED (0x8) set, HS_DIRTY (0x2) and HS_LOST (0x40) clear, read
# from the hex flags after the last ": (0x", never from words a path could contain). Returns non-zero when the
# files cannot be listed or lfs fails: a state that cannot be read is never "exported".
export_state() {
  local files states
  files="$(find "$MLINFRA_CHECKPOINTS_DIR" -type f -printf x | wc -c)" || return 1
  if (( files == 0 )); then echo "0 0"; return 0; fi
  states="$(find "$MLINFRA_CHECKPOINTS_DIR" -type f -print0 | xargs -0 -r lfs hsm_state)" || return 1
  awk -v files="$files" '
    match($0, /: \(0x[0-9a-fA-F]+\)( [a-z_]+)*(, archive_id:[0-9]+)?$/) {
      flags = substr($0, RSTART + 5); sub(/\).*/, "", flags)
      mask = 0
      for (i = 1; i <= length(flags); i++) mask = mask * 16 + index("0123456789abcdef", tolower(substr(flags, i, 1))) - 1
      records++
      if (int(mask / 8) % 2 == 1 && int(mask / 2) % 2 == 0 && int(mask / 64) % 2 == 0) exported++
    }
    END { if (records != files) exit 1; print files, exported + 0 }' <<<"$states"
}

# wait_for_export: 0 once every checkpoint file is exported to the registry; 1 after MLINFRA_EXPORT_TIMEOUT
# seconds, or when the state cannot be read. The checkpoints association exports new and changed files
# asynchronously, so a file not yet archived is waited for.
wait_for_export() {
  local deadline=$((SECONDS + MLINFRA_EXPORT_TIMEOUT)) state files exported
  while :; do
    if state="$(export_state)"; then
      read -r files exported <<<"$state"
      if (( exported == files )); then
        log "checkpoints exported: ${exported} of ${files} files"
        return 0
      fi
      log "checkpoints not yet exported: ${exported} of ${files} files"
    else
      log "could not read the checkpoints' export state (find or lfs hsm_state failed)"
      exported="?" files="?"
    fi
    if (( SECONDS >= deadline )); then
      log "checkpoints not exported after ${MLINFRA_EXPORT_TIMEOUT}s: ${exported} of ${files} files"
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
  fail "expected ${MLINFRA_EFA_DEVICES} EFA devices, found ${mlinfra_efa_found}: check the launch template's network interfaces"
fi
# ==== private_ip ====
imds_token() {
  curl -sSf -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' http://169.254.169.254/latest/api/token
}
mlinfra_token="$(retry 10 3 imds_token)" || fail "IMDS gave no session token"
MLINFRA_PRIVATE_IP="$(curl -sSf -H "X-aws-ec2-metadata-token: ${mlinfra_token}" \
  http://169.254.169.254/latest/meta-data/local-ipv4)" || fail "IMDS gave no private IPv4 address"
