"""The fabric gate's program (infra/training/fabric_check.py), run for real: torchrun with the bootstrap's static
rendezvous flags, two processes, torch.distributed's gloo backend on CPU. Its arithmetic and verdicts are checked
directly; the floors it is given are catalog data (infra/catalog/data/fabric.json)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from infra.catalog.aws import instance_type
from infra.catalog.fabric import fabric_floor, fabric_message_bytes, gcp_net_plugin, known_fabric_types
from infra.catalog.gcp import machine_type
from infra.catalog.roles import types_for
from infra.training.fabric_check import BELOW_FLOOR, NO_COLLECTIVES, PASSED, bus_bandwidth, main, verdict

PROGRAM = Path(__file__).resolve().parents[3] / "infra/training/fabric_check.py"
TORCHRUN = Path(sys.executable).with_name("torchrun")
torch_installed = pytest.mark.skipif(not TORCHRUN.exists(), reason="torch (the test extra) not installed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_gate(tmp_path: Path, floor: float, nbytes: int = 1 << 20, nproc: int = 2) -> tuple[int, str, str]:
    """The gate as the bootstrap starts it (static rendezvous, one node here), with the gloo backend."""
    result = tmp_path / "fabric-result.txt"
    command = [
        str(TORCHRUN),
        "--nnodes=1",
        f"--nproc-per-node={nproc}",
        "--node-rank=0",
        "--rdzv-backend=static",
        "--master-addr=127.0.0.1",
        f"--master-port={free_port()}",
        str(PROGRAM),
        "--backend",
        "gloo",
        "--bytes",
        str(nbytes),
        "--min-busbw",
        str(floor),
        "--timeout",
        "60",
        "--result",
        str(result),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
    return done.returncode, result.read_text(encoding="utf-8") if result.exists() else "", done.stderr


@torch_installed
def test_two_processes_that_reach_the_floor_pass(tmp_path):
    code, line, log = torchrun_gate(tmp_path, floor=0.0001)
    assert code == 0, log
    assert line.startswith("all-reduce bus bandwidth ") and line.endswith(" at or above the floor of 0.0001 GB/s\n"), (
        line
    )
    assert " across 2 ranks (1048576 bytes, " in line
    # The figure is printed to two decimals: a loaded machine's gloo can measure under 0.005 GB/s, printed 0.00.
    assert float(line.split()[3]) >= 0


@torch_installed
def test_below_the_floor_every_rank_fails_with_the_figure_and_the_floor(tmp_path):
    code, line, log = torchrun_gate(tmp_path, floor=1e6)
    assert code != 0  # torchrun reports its workers' failure
    assert "below the floor of 1e+06 GB/s: collectives are not using the fabric as they should" in line, line
    assert log.count("mlinfra fabric check: all-reduce bus bandwidth") == 2  # both ranks judged, the same way


def test_a_failed_process_group_is_a_failure_not_a_traceback(tmp_path, monkeypatch, capsys):
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)  # no torchrun: the process group cannot form
    result = tmp_path / "r.txt"
    args = ["--backend", "gloo", "--bytes", "64", "--min-busbw", "1", "--timeout", "5", "--result", str(result)]
    assert main(args) == NO_COLLECTIVES
    assert result.read_text(encoding="utf-8").startswith("no all-reduce across the nodes (gloo): ")
    assert "Traceback" not in capsys.readouterr().err


def test_bus_bandwidth_is_nccl_tests_all_reduce_busbw():
    # 1 GB in 26.67 ms across 16 ranks: algbw 37.5 GB/s, busbw x 2*15/16 = 70.3 GB/s
    assert bus_bandwidth(10**9, 0.026666, 16) == pytest.approx(70.31, abs=0.01)
    assert bus_bandwidth(10**9, 1.0, 2) == pytest.approx(1.0)  # two ranks: busbw = algbw
    assert bus_bandwidth(10**9, 1.0, 1) == 0.0  # one rank moves nothing
    assert verdict(12.5, 12.5, 16, 1 << 30, 0.1)[0] == PASSED
    code, line = verdict(4.08, 12.5, 16, 1 << 30, 0.5)
    assert code == BELOW_FLOOR and "4.08 GB/s across 16 ranks" in line and "below the floor of 12.5 GB/s" in line


def test_the_program_needs_only_the_standard_library_and_torch():
    imports = [
        line.split()[1]
        for line in PROGRAM.read_text(encoding="utf-8").splitlines()
        if line.startswith(("import ", "from "))
    ]
    assert {name.split(".")[0] for name in imports} <= {"__future__", "argparse", "os", "sys", "time", "datetime"}
    assert "@@" not in PROGRAM.read_text(encoding="utf-8")  # it is rendered into the bootstrap template as a value


# ---- the floors are catalog data, each from the type's line rate ----


def test_every_training_type_has_a_floor_of_a_quarter_of_its_line_rate():
    assert set(known_fabric_types("aws")) == set(types_for("training"))
    for name in known_fabric_types("aws"):
        itype, floor = instance_type(name), fabric_floor("aws", name)
        line_rate = sum(card.peak_gbps for card in itype.efa_cards) / 8  # Gbps -> GB/s
        assert floor.line_rate_gbps == line_rate, name
        assert floor.min_bus_bandwidth_gbps == line_rate / 4, name
    for name in ("a3-highgpu-8g", "a3-megagpu-8g"):
        mtype, floor = machine_type(name), fabric_floor("gcp", name)
        assert (
            floor.line_rate_gbps == mtype.gpu_nics * 200 / 8
            and floor.min_bus_bandwidth_gbps == floor.line_rate_gbps / 4
        )
        assert gcp_net_plugin(name).networking == mtype.gpu_networking


def test_the_published_p4d_figures_sit_either_side_of_its_floor():
    floor = fabric_floor("aws", "p4d.24xlarge")
    assert floor.published is not None and floor.published["messageBytes"] == fabric_message_bytes()
    assert floor.published["tcpBusBandwidthGBps"] < floor.min_bus_bandwidth_gbps < floor.published["busBandwidthGBps"]
