# NCCL on A3's GPU NICs, for the GCP node bootstrap's @@FABRIC_ENV@@ (rendered by infra/training/gcp/startup.py
# from infra/catalog/data/fabric.json, filled in one pass): the `nics` section, then `tcpx` or `tcpxo`.
# ==== nics ====
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
for mlinfra_cidr in @@GPU_SUBNETS@@; do
  mlinfra_nic="$(mlinfra_nic_of "$mlinfra_cidr")" || fail "no network interface on the GPU subnet ${mlinfra_cidr}"
  mlinfra_gpu_nics+=("$mlinfra_nic")
done
mlinfra_gpu_nic_list="$(IFS=,; echo "${mlinfra_gpu_nics[*]}")"
log "NCCL interfaces: ${MLINFRA_NIC0} (bootstrap), ${mlinfra_gpu_nic_list} (GPU NICs)"
# ==== tcpx ====
# ---- GPUDirect-TCPX (@@MACHINE_TYPE@@), as Google's A3 recipe sets it (infra/catalog/data/fabric.json) ----
# NCCL_NET=@@NET_NAME@@: NCCL uses the TCPX plugin or fails, never its own sockets on nic0.
if [[ ! -d @@RXDM_DIR@@ ]]; then
  fail "GPUDirect-TCPX's receive-datapath manager is not running (no @@RXDM_DIR@@): the image must start Google's tcpgpudmarxd before the job"
fi
export LD_LIBRARY_PATH=@@LIB_DIR@@"${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
export NCCL_NET=@@NET_NAME@@
export NCCL_SOCKET_IFNAME="$MLINFRA_NIC0"
export NCCL_GPUDIRECTTCPX_CTRL_DEV="$MLINFRA_NIC0"
export NCCL_GPUDIRECTTCPX_SOCKET_IFNAME="$mlinfra_gpu_nic_list"
export NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX=@@RXDM_DIR@@
@@FIXED_ENV@@mlinfra_tx_cpus=(@@TX_CPUS@@)
mlinfra_rx_cpus=(@@RX_CPUS@@)
NCCL_GPUDIRECTTCPX_TX_BINDINGS="" NCCL_GPUDIRECTTCPX_RX_BINDINGS=""
for mlinfra_i in "${!mlinfra_gpu_nics[@]}"; do
  NCCL_GPUDIRECTTCPX_TX_BINDINGS+="${NCCL_GPUDIRECTTCPX_TX_BINDINGS:+;}${mlinfra_gpu_nics[$mlinfra_i]}:${mlinfra_tx_cpus[$mlinfra_i]}"
  NCCL_GPUDIRECTTCPX_RX_BINDINGS+="${NCCL_GPUDIRECTTCPX_RX_BINDINGS:+;}${mlinfra_gpu_nics[$mlinfra_i]}:${mlinfra_rx_cpus[$mlinfra_i]}"
done
export NCCL_GPUDIRECTTCPX_TX_BINDINGS NCCL_GPUDIRECTTCPX_RX_BINDINGS
# ==== tcpxo ====
# ---- GPUDirect-TCPXO (@@MACHINE_TYPE@@), as Google's A3 Mega recipe sets it (infra/catalog/data/fabric.json) ----
# The plugin's own settings script first, then the interfaces; NCCL_NET=@@NET_NAME@@: NCCL uses the TCPXO plugin or
# fails, never its own sockets on nic0.
if [[ ! -d @@LLCM_DIR@@ ]]; then
  fail "GPUDirect-TCPXO's receive-datapath manager is not running (no @@LLCM_DIR@@): the image must start Google's tcpgpudmarxd before the job"
fi
set +eu
# shellcheck source=/dev/null
NCCL_LIB_DIR=@@LIB_DIR@@ source @@ENV_PROFILE@@
mlinfra_profile_code=$?
set -eu
if (( mlinfra_profile_code != 0 )); then fail "sourcing @@ENV_PROFILE@@ failed (exit ${mlinfra_profile_code})"; fi
export LD_LIBRARY_PATH=@@LIB_DIR@@"${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
export NCCL_FASTRAK_CTRL_DEV="$MLINFRA_NIC0"
export NCCL_FASTRAK_IFNAME="$mlinfra_gpu_nic_list"
export NCCL_SOCKET_IFNAME="$MLINFRA_NIC0"
export NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY=@@LLCM_DIR@@
export NCCL_NET=@@NET_NAME@@
