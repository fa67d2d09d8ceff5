# The GCP parts of the training node bootstrap: GPU NICs, the metadata server, gcloud storage.
# Sections of the node bootstrap (infra/training/bootstrap.sh), filled into its @@SLOT@@ markers by
# infra/training/bootstrap.py; each section runs from its marker line to the next.
# ==== variables_a ====
MLINFRA_GPU_NICS=@@GPU_NICS@@
# ==== variables_b ====
MLINFRA_CHECKPOINTS_URI=@@CHECKPOINTS_URI@@
# ==== export_functions ====
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
# ==== marker_upload ====
    | gcloud storage cp - "${MLINFRA_MARKER_URI}/_${status}" --content-type=application/json \
        --no-user-output-enabled
# ==== devices_check ====
# ---- GPU NICs: nic0 plus one NIC per GPU NIC (each in its own VPC); all of them must be here ----
mlinfra_nics_found=$(find /sys/class/net -mindepth 1 -maxdepth 1 -exec test -e '{}/device' ';' -print | wc -l)
if (( mlinfra_nics_found < MLINFRA_GPU_NICS + 1 )); then
  fail "expected $((MLINFRA_GPU_NICS + 1)) NICs (nic0 and ${MLINFRA_GPU_NICS} GPU NICs), found ${mlinfra_nics_found}: check the instance's network interfaces"
fi
# ==== private_ip ====
mlinfra_metadata_ip() {
  curl -sSf -H 'Metadata-Flavor: Google' \
    http://metadata.google.internal/computeMetadata/v1/instance/network-interfaces/0/ip
}
MLINFRA_PRIVATE_IP="$(retry 10 3 mlinfra_metadata_ip)" || fail "the metadata server gave no private IPv4 address"
