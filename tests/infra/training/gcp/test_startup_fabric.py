"""NCCL on A3's GPU NICs in the GCP startup script, run under bash with a stand-in `ip`: the interfaces found by
their subnets, the plugin forced with NCCL_NET (GPUDirect-TCPX on a3-highgpu-8g, -TCPXO on a3-megagpu-8g, as
Google's cluster-toolkit recipes set them), and the run failing with the reason when the image lacks a part."""

from __future__ import annotations

import shutil
import stat
import subprocess

import pytest

from infra.training.gcp.startup import gpu_nic_env, render_startup_script
from tests.infra.training.gcp.test_gcp_training import bootstrap, mega

BASH = shutil.which("bash")
# `ip -o -4 addr show` on an A3 node whose image names NICs by PCI slot (Ubuntu's naming, cluster-toolkit's names)
IP_ADDR = """1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever
2: enp0s12    inet 10.0.0.5/32 metric 100 scope global dynamic enp0s12\\       valid_lft 3000sec preferred_lft 3000sec
3: enp6s0    inet 10.128.0.7/32 metric 100 scope global dynamic enp6s0\\       valid_lft 3000sec
4: enp12s0    inet 10.128.16.7/32 metric 100 scope global dynamic enp12s0\\       valid_lft 3000sec
5: enp134s0    inet 10.128.32.7/32 metric 100 scope global dynamic enp134s0\\       valid_lft 3000sec
6: enp140s0    inet 10.128.48.7/32 metric 100 scope global dynamic enp140s0\\       valid_lft 3000sec
"""


def run_fabric_env(tmp_path, spec, ip_addr=IP_ADDR, make_dirs=True) -> subprocess.CompletedProcess:
    """The script's FABRIC_ENV section under bash, on a node whose `ip` answers `ip_addr`; prints NCCL's env."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ip").write_text(f"#!/bin/bash\ncat <<'EOF'\n{ip_addr}EOF\n", encoding="utf-8")
    (bin_dir / "ip").chmod(stat.S_IRWXU)
    lib = tmp_path / "lib64"
    lib.mkdir()
    (lib / "nccl-env-profile.sh").write_text('export NCCL_PROFILE_SET="from ${NCCL_LIB_DIR}"\n', encoding="utf-8")
    if make_dirs:
        (tmp_path / "rxdm").mkdir()
    section = gpu_nic_env(spec)
    for real in ("/run/tcpx", "/dev/aperture_devices"):
        section = section.replace(real, str(tmp_path / "rxdm"))
    section = section.replace("/var/lib/tcpx/lib64", str(lib)).replace("/var/lib/tcpxo/lib64", str(lib))
    script = (
        "set -euo pipefail\n"
        'log() { echo "$*" >&2; }\nfail() { echo "FAILED: $*"; exit 1; }\n'
        "MLINFRA_PRIVATE_IP=10.0.0.5\n" + section + "env | grep -E '^(NCCL_|LD_LIBRARY_PATH)' | sort\n"
    )
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    return subprocess.run([BASH, "-c", script], capture_output=True, text=True, env=env, timeout=30)


@pytest.mark.skipif(BASH is None, reason="bash not installed")
def test_tcpx_finds_the_gpu_nics_by_subnet_and_forces_the_plugin(tmp_path):
    done = run_fabric_env(tmp_path, bootstrap())
    assert done.returncode == 0, done.stdout + done.stderr
    env = dict(line.split("=", 1) for line in done.stdout.splitlines())
    assert env["NCCL_NET"] == "GPUDirectTCPX_v7"
    assert env["NCCL_SOCKET_IFNAME"] == env["NCCL_GPUDIRECTTCPX_CTRL_DEV"] == "enp0s12"
    assert env["NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"] == "enp6s0,enp12s0,enp134s0,enp140s0"
    # cluster-toolkit's run-nccl-tests.sh for a3-highgpu-8g, NIC by NIC
    assert env["NCCL_GPUDIRECTTCPX_TX_BINDINGS"] == (
        "enp6s0:8-21,112-125;enp12s0:8-21,112-125;enp134s0:60-73,164-177;enp140s0:60-73,164-177"
    )
    assert env["NCCL_GPUDIRECTTCPX_RX_BINDINGS"] == (
        "enp6s0:22-35,126-139;enp12s0:22-35,126-139;enp134s0:74-87,178-191;enp140s0:74-87,178-191"
    )
    assert env["LD_LIBRARY_PATH"] == str(tmp_path / "lib64")
    assert env["NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX"] == str(tmp_path / "rxdm")


@pytest.mark.skipif(BASH is None, reason="bash not installed")
def test_tcpxo_sources_the_plugins_profile_then_names_the_interfaces(tmp_path):
    ip_addr = IP_ADDR + "".join(
        f"{7 + i}: gpu{i}    inet 10.128.{16 * i}.9/32 scope global gpu{i}\n" for i in range(4, 8)
    )
    done = run_fabric_env(tmp_path, mega(), ip_addr=ip_addr)
    assert done.returncode == 0, done.stdout + done.stderr
    env = dict(line.split("=", 1) for line in done.stdout.splitlines())
    assert env["NCCL_NET"] == "FasTrak" and env["NCCL_PROFILE_SET"] == f"from {tmp_path / 'lib64'}"
    assert env["NCCL_FASTRAK_CTRL_DEV"] == env["NCCL_SOCKET_IFNAME"] == "enp0s12"
    assert env["NCCL_FASTRAK_IFNAME"] == "enp6s0,enp12s0,enp134s0,enp140s0,gpu4,gpu5,gpu6,gpu7"
    assert env["NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"] == str(tmp_path / "rxdm")


@pytest.mark.skipif(BASH is None, reason="bash not installed")
@pytest.mark.parametrize(
    ("ip_addr", "make_dirs", "reason"),
    [
        (IP_ADDR, False, "FAILED: GPUDirect-TCPX's receive-datapath manager is not running (no "),
        (
            IP_ADDR.replace("10.128.48.7", "10.200.0.7"),
            True,
            "FAILED: no network interface on the GPU subnet 10.128.48.0/20",
        ),
    ],
)
def test_a_node_that_cannot_use_its_gpu_nics_fails_with_the_reason(tmp_path, ip_addr, make_dirs, reason):
    done = run_fabric_env(tmp_path, bootstrap(), ip_addr=ip_addr, make_dirs=make_dirs)
    assert done.returncode == 1 and done.stdout.startswith(reason), done.stdout


def test_the_image_check_names_the_plugin_and_the_gate_runs_over_it():
    high, megagpu = render_startup_script(bootstrap()), render_startup_script(mega())
    assert (
        "find_library MLINFRA_NCCL_NET_PLUGIN 'the GPUDirect-TCPX NCCL plugin' /var/lib/tcpx/lib64/libnccl-net.so"
        in high
    )
    assert "/var/lib/tcpxo/lib64/nccl-env-profile.sh" in megagpu and "export NCCL_NET=FasTrak" in megagpu
    assert "require_command 'the Lustre client (mounts Managed Lustre)' mount.lustre" in high
    assert "--backend nccl --bytes 1073741824 --min-busbw 25 " in high
    assert "--backend nccl --bytes 1073741824 --min-busbw 50 " in megagpu
