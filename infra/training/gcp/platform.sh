# The GCP parts of the training node bootstrap: GPU NICs, the metadata server, gcloud storage.
# Sections of the node bootstrap (infra/training/bootstrap.sh), filled into its @@SLOT@@ markers by
# infra/training/bootstrap.py; each section runs from its marker line to the next.
# ==== variables_a ====
MLINFRA_GPU_NICS=@@GPU_NICS@@
# ==== variables_b ====
MLINFRA_CHECKPOINTS_URI=@@CHECKPOINTS_URI@@
# ==== export_functions ====
# wait_for_export: copy every checkpoint file to the bucket (Managed Lustre is not linked to it);
# 0 once they are there, 1 on failure or after MLINFRA_EXPORT_TIMEOUT seconds.
wait_for_export() {
  if [[ -z "$(find "$MLINFRA_CHECKPOINTS_DIR" -type f -print -quit 2>/dev/null)" ]]; then return 0; fi
  timeout "$MLINFRA_EXPORT_TIMEOUT" gcloud storage cp --recursive "${MLINFRA_CHECKPOINTS_DIR}/*" \
    "${MLINFRA_CHECKPOINTS_URI}/" --no-user-output-enabled \
    || { log "checkpoints not copied to ${MLINFRA_CHECKPOINTS_URI} within ${MLINFRA_EXPORT_TIMEOUT}s"; return 1; }
}
# ==== marker_upload ====
    | gcloud storage cp - "${MLINFRA_MARKER_URI}/_${status}" --content-type=application/json \
        --no-user-output-enabled
# ==== devices_check ====
# ---- GPU NICs: nic0 plus one NIC per GPU NIC (each in its own VPC); all of them must be here ----
mlinfra_nics_found=$(find /sys/class/net -mindepth 1 -maxdepth 1 -exec test -e '{}/device' ';' -print | wc -l)
if (( mlinfra_nics_found < MLINFRA_GPU_NICS + 1 )); then
  log "expected $((MLINFRA_GPU_NICS + 1)) NICs (nic0 and ${MLINFRA_GPU_NICS} GPU NICs), found ${mlinfra_nics_found}: check the instance's network interfaces"
  exit 1
fi
# ==== private_ip ====
mlinfra_metadata_ip() {
  curl -sSf -H 'Metadata-Flavor: Google' \
    http://metadata.google.internal/computeMetadata/v1/instance/network-interfaces/0/ip
}
MLINFRA_PRIVATE_IP="$(retry 10 3 mlinfra_metadata_ip)"
