# The fabric gate of the node bootstrap (infra/training/bootstrap.sh), rendered into its @@FABRIC_GATE@@ by
# infra/training/bootstrap.py when the run has more than one node and the gate is not skipped.
# ---- the fabric gate: an all-reduce across every node before the job (infra/training/fabric_check.py) ----
# torchrun runs it with the job's static rendezvous (on the next port) and the fabric settings above. Below
# @@GATE_FLOOR@@ GB/s of bus bandwidth, or with no collectives across the nodes at all, the run fails here: the
# _FAILED marker's reason carries the figure and the floor.
MLINFRA_FABRIC_RESULT="${MLINFRA_STATE_DIR}/fabric-result.txt"
rm -f "$MLINFRA_FABRIC_RESULT"
cat > "${MLINFRA_STATE_DIR}/fabric_check.py" <<'MLINFRA_FABRIC_CHECK'
@@GATE_PROGRAM@@MLINFRA_FABRIC_CHECK
log "fabric gate: all-reduce of @@GATE_BYTES@@ bytes across ${MLINFRA_NODE_COUNT} nodes, floor @@GATE_FLOOR@@ GB/s"
mlinfra_fabric_code=0
timeout @@GATE_TIMEOUT@@ "$MLINFRA_TORCHRUN" "${mlinfra_static_rdzv[@]}" --master-port="$((MLINFRA_RDZV_PORT + 1))" \
  "${MLINFRA_STATE_DIR}/fabric_check.py" --backend @@GATE_BACKEND@@ --bytes @@GATE_BYTES@@ --min-busbw @@GATE_FLOOR@@ \
  --timeout @@GATE_COLLECTIVE_TIMEOUT@@ --result "$MLINFRA_FABRIC_RESULT" || mlinfra_fabric_code=$?
mlinfra_fabric_line=""
if [[ -s "$MLINFRA_FABRIC_RESULT" ]]; then mlinfra_fabric_line="$(head -n 1 "$MLINFRA_FABRIC_RESULT")"; fi
if (( mlinfra_fabric_code != 0 )); then
  fail "fabric gate failed (exit ${mlinfra_fabric_code}): ${mlinfra_fabric_line:-no result within @@GATE_TIMEOUT@@s: a node could not start the check or join its collectives}"
fi
log "fabric gate passed: ${mlinfra_fabric_line}"
