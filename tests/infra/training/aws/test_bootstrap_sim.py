"""The AWS node bootstrap run for real under bash on a simulated cluster (tests/infra/training/aws/bootstrap_sim.py):
ranks and the static rendezvous, the launch generations, the export wait, the image checks, the fabric gate, the
markers and their reasons, and what a terminated node does."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time

import pytest

from tests.infra.training.aws.bootstrap_sim import (
    BASH,
    MARKER,
    Cluster,
    prepare,
    register_stale,
    run,
    sim_spec,
    start_node,
    training_spec,
)

pytestmark = pytest.mark.skipif(BASH is None, reason="bash not installed")
SUCCESS, FAILED = MARKER.format("SUCCESS"), MARKER.format("FAILED")


def marker(cluster, name=FAILED) -> dict:
    assert list(cluster.markers()) == [name], cluster.logs
    return json.loads(cluster.markers()[name].read_text(encoding="utf-8"))


def args_of(cluster, ip, kind="args") -> list[str]:
    return (cluster.out / f"{kind}.{ip}").read_bytes().decode().split("\0")[:-1]


def test_simulated_cluster_ranks_nodes_and_reports_success(tmp_path):
    ips = ["10.0.1.30", "10.0.1.4", "10.0.1.200"]
    spec = sim_spec(command=("train.py", "--tag", "; touch PWNED #"), env={"JOB_NOTE": "$(touch PWNED) x"})
    cluster = run(tmp_path, spec, ips, poll_cap=0.2)
    assert cluster.codes == dict.fromkeys(ips, 0), cluster.logs
    ordered = sorted(ips)  # "10.0.1.200" < "10.0.1.30" < "10.0.1.4": byte order, the same on every node
    for ip in ips:
        assert args_of(cluster, ip) == [
            "--nnodes=3",
            "--nproc-per-node=8",
            f"--node-rank={ordered.index(ip)}",
            "--rdzv-backend=static",
            f"--master-addr={ordered[0]}",
            "--master-port=29500",
            "train.py",
            "--tag",
            "; touch PWNED #",
        ]
        env = (cluster.out / f"env.{ip}").read_text(encoding="utf-8")
        assert "FI_PROVIDER=efa\n" in env and f"MLINFRA_NODE_RANK={ordered.index(ip)}\n" in env
        assert "NCCL_NET=OFI\n" in env and f"NCCL_NET_PLUGIN={tmp_path}/ofi-nccl/lib/libnccl-net-ofi.so\n" in env
        assert "JOB_NOTE=$(touch PWNED) x\n" in env  # the job's env reaches the job, verbatim
        assert f"MLINFRA_CHECKPOINTS_DIR={tmp_path}/fsx/checkpoints\n" in env
        assert "MLINFRA_GENERATION=p4d.24xlarge-x3-us-east-1a-on-demand\n" in env
    assert not (tmp_path / "PWNED").exists()
    hosts = cluster.fsx / "runs/demo-001/hosts/p4d.24xlarge-x3-us-east-1a-on-demand"
    assert sorted(p.name for p in hosts.iterdir()) == ordered  # the generation's rendezvous, keyed by its id
    found = marker(cluster, SUCCESS)
    assert {k: found[k] for k in ("run_id", "status", "exit_code", "node_count", "rank", "host", "reason")} == {
        "run_id": "demo-001",
        "status": "SUCCESS",
        "exit_code": 0,
        "node_count": 3,
        "rank": 0,
        "host": ordered[0],
        "reason": "",
    }
    assert found["generation"] == "p4d.24xlarge-x3-us-east-1a-on-demand"
    assert found["expires_at"] == 0  # this deployment has no expiry: the marker says which deployment wrote it
    assert found["started_at"] <= found["ended_at"] and found["ended_at"].endswith("Z")
    args = (cluster.s3 / f"{SUCCESS}.args").read_text(encoding="utf-8").split("\n")
    assert args[:4] == ["s3", "cp", "-", "s3://mlinfra-registry-123456789012/runs/demo-001/_SUCCESS"]
    assert "--sse\naws:kms\n" in "\n".join(args)
    assert found["checkpoints_exported"] is True
    for ip in ips:  # every node powers off once its job ends
        assert (cluster.out / f"shutdown.{ip}").read_text(encoding="utf-8").startswith("-h\n+1\n")


# ---- launch generations (defect 5): a replaced fleet's registrations never count ----


def test_a_new_generation_joins_the_same_file_system_and_ranks_only_its_own_nodes(tmp_path):
    """The run's Lustre keeps what earlier fleets left: registrations at the old, unkeyed place, those of another
    generation (the fleet before a nodeCount change), and dead ones of this very generation (an earlier launch of
    the same shape, killed before it could leave). The new fleet's nodes count only each other."""
    runs = tmp_path / "fsx/runs/demo-001/hosts"
    register_stale(runs, ["10.0.9.1", "10.0.9.2", "10.0.9.3", "10.0.9.4"], age_seconds=60)  # the old layout
    register_stale(runs / "p4d.24xlarge-x4-us-east-1a-on-demand", ["10.0.9.1", "10.0.9.2", "10.0.9.3", "10.0.9.4"])
    register_stale(runs / "p4d.24xlarge-x2-us-east-1a-on-demand", ["10.0.8.1", "10.0.8.2"], age_seconds=600)
    ips = ["10.0.7.5", "10.0.7.9"]
    cluster = run(tmp_path, sim_spec(node_count=2), ips, poll_cap=0.2)
    assert cluster.codes == dict.fromkeys(ips, 0), cluster.logs
    for rank, ip in enumerate(ips):
        assert f"--node-rank={rank}" in args_of(cluster, ip) and "--nnodes=2" in args_of(cluster, ip)
    assert marker(cluster, SUCCESS)["generation"] == "p4d.24xlarge-x2-us-east-1a-on-demand"


def test_more_live_nodes_than_the_generation_launched_fail_the_run_with_the_reason(tmp_path):
    spec = sim_spec(node_count=1)
    register_stale(tmp_path / "fsx/runs/demo-001/hosts" / spec.generation, ["10.0.6.9"], age_seconds=1)
    cluster = run(tmp_path, spec, ["10.0.6.1"], poll_cap=0.2)
    assert cluster.codes == {"10.0.6.1": 1}
    assert "2 live nodes in" in marker(cluster)["reason"]


# ---- the export wait (defect 6): count the files and the exported files, and require equality ----


def test_success_waits_for_checkpoints_to_reach_the_registry(tmp_path):
    spec = sim_spec(node_count=1, export_timeout_seconds=1)
    cluster = run(tmp_path, spec, ["10.0.3.1"], lfs_flags="0000000b", checkpoint=True, poll_cap=0.2)
    assert cluster.codes == {"10.0.3.1": 0}, cluster.logs
    found = marker(cluster)
    assert (found["status"], found["exit_code"], found["checkpoints_exported"]) == ("FAILED", 0, False)
    assert "checkpoints not exported after 1s: 0 of 1 files" in cluster.logs["10.0.3.1"]


def test_exported_checkpoints_let_the_run_succeed(tmp_path):
    cluster = run(tmp_path, sim_spec(node_count=1), ["10.0.3.2"], checkpoint=True, poll_cap=0.2)
    assert marker(cluster, SUCCESS)["checkpoints_exported"] is True
    assert "checkpoints exported: 1 of 1 files" in cluster.logs["10.0.3.2"]


def test_a_failing_lfs_is_never_exported(tmp_path):
    """lfs hsm_state that fails prints nothing on stdout: the old count of 'pending' lines read that as 0 pending."""
    spec = sim_spec(node_count=1, export_timeout_seconds=1)
    cluster = run(tmp_path, spec, ["10.0.3.3"], lfs_fail=1, checkpoint=True, poll_cap=0.2)
    assert marker(cluster)["checkpoints_exported"] is False
    assert "could not read the checkpoints' export state" in cluster.logs["10.0.3.3"]


def test_a_path_that_says_archived_is_not_an_exported_file(tmp_path):
    """A file Lustre never archived (flags: exists) whose path contains 'archived': the old `!/archived/` matched
    the path and counted it exported; the flags are what say it."""
    spec = sim_spec(node_count=1, export_timeout_seconds=1)
    prepare(tmp_path, spec)
    (tmp_path / "fsx/checkpoints/archived").mkdir(parents=True)
    (tmp_path / "fsx/checkpoints/archived/step-200.pt").write_text("weights", encoding="utf-8")
    cluster = run(tmp_path, spec, ["10.0.3.4"], lfs_flags="00000001", poll_cap=0.2)
    assert marker(cluster)["checkpoints_exported"] is False
    assert "0 of 1 files" in cluster.logs["10.0.3.4"]


def test_dirty_or_lost_files_are_not_exported_whatever_else_is_set(tmp_path):
    for flags, exported in (("00000009", True), ("0000000d", True), ("0000000b", False), ("00000049", False)):
        spec = sim_spec(node_count=1, export_timeout_seconds=1)
        root = tmp_path / flags
        root.mkdir()
        cluster = run(root, spec, ["10.0.3.5"], lfs_flags=flags, checkpoint=True, poll_cap=0.2)
        name = SUCCESS if exported else FAILED
        assert marker(cluster, name)["checkpoints_exported"] is exported, flags


# ---- failures end the run with a _FAILED marker that says why ----


def test_simulated_job_failure_is_reported_by_rank_0(tmp_path):
    ips = ["10.0.2.1", "10.0.2.2"]
    cluster = run(tmp_path, sim_spec(node_count=2), ips, per_node={"10.0.2.1": {"exit": 3}}, poll_cap=0.2)
    assert cluster.codes == {"10.0.2.1": 3, "10.0.2.2": 0}, cluster.logs
    found = marker(cluster)
    assert (found["status"], found["exit_code"], found["rank"], found["reason"]) == ("FAILED", 3, 0, "the job exited 3")


def test_simulated_rendezvous_timeout_fails_the_run(tmp_path):
    spec = sim_spec(node_count=2, rendezvous_timeout_seconds=1)
    cluster = run(tmp_path, spec, ["10.0.3.1"], poll_cap=0.2)
    assert cluster.codes == {"10.0.3.1": 1}
    found = marker(cluster)
    assert (found["exit_code"], found["rank"]) == (1, None)
    assert found["reason"] == (
        "rendezvous timed out after 1s: 1 of 2 nodes of generation p4d.24xlarge-x2-us-east-1a-on-demand checked in"
    )
    assert not list(cluster.out.glob("args.*"))  # torchrun never started
    assert (cluster.out / "shutdown.10.0.3.1").exists()  # and the node powers off


def test_simulated_node_missing_efa_devices_fails_fast(tmp_path):
    cluster = run(tmp_path, sim_spec(node_count=1), ["10.0.4.1"], efa_found=2, poll_cap=0.2)
    assert cluster.codes == {"10.0.4.1": 1}
    assert marker(cluster)["reason"].startswith("expected 4 EFA devices, found 2")
    assert not list(cluster.out.glob("args.*"))  # torchrun never started
    assert (cluster.out / "shutdown.10.0.4.1").exists()  # and the node powers off


# ---- the image's facts (infra/catalog/data/aws_node_images.json), checked before anything runs ----


@pytest.mark.parametrize(
    ("breakage", "reason"),
    [
        (
            {"remove": "mount.lustre"},
            "the node image lacks the Lustre client (mounts FSx for Lustre): no 'mount.lustre' on PATH",
        ),
        ({"remove": "lfs"}, "the node image lacks lfs (reads the HSM state that says the checkpoints are exported)"),
        ({"fi_info": 1}, "the node image lacks the EFA provider of libfabric: '"),
        ({"plugin": False}, "the node image lacks the aws-ofi-nccl plugin (NCCL over EFA): none of "),
        ({"remove": "torchrun"}, "the node image lacks torchrun (set job.torchrunPath for another image)"),
    ],
)
def test_a_fact_the_image_lacks_ends_the_run_before_anything_else(tmp_path, breakage, reason):
    spec = sim_spec(node_count=1)
    prepare(tmp_path, spec, plugin=breakage.get("plugin", True))
    if "remove" in breakage:
        (tmp_path / "bin" / breakage["remove"]).unlink()
    node = start_node(tmp_path, "10.0.5.1", fi_info=breakage.get("fi_info"))
    assert node.wait(timeout=60) == 1
    cluster = Cluster(tmp_path, {}, {"10.0.5.1": node.stdout.read().decode()})
    found = marker(cluster)
    assert found["reason"].startswith(reason), found["reason"]
    assert found["rank"] is None and not (tmp_path / "fsx/runs").exists()  # before the mount and the rendezvous


# ---- the fabric gate ----


def test_the_fabric_gate_runs_with_the_static_rendezvous_before_the_job(tmp_path):
    ips = ["10.0.5.1", "10.0.5.2"]
    cluster = run(tmp_path, sim_spec(node_count=2), ips, poll_cap=0.2)
    assert cluster.codes == dict.fromkeys(ips, 0), cluster.logs
    for rank, ip in enumerate(ips):
        gate = args_of(cluster, ip, "gate-args")
        assert gate[:6] == [
            "--nnodes=2",
            "--nproc-per-node=8",
            f"--node-rank={rank}",
            "--rdzv-backend=static",
            "--master-addr=10.0.5.1",
            "--master-port=29501",
        ]
        assert gate[6].endswith(f"/state/{ip}/fabric_check.py")
        assert gate[7:13] == ["--backend", "nccl", "--bytes", "1073741824", "--min-busbw", "12.5"]
        gate_env = (cluster.out / f"gate-env.{ip}").read_text(encoding="utf-8")
        assert "NCCL_NET=OFI\n" in gate_env and "FI_PROVIDER=efa\n" in gate_env
        assert "fabric gate passed: all-reduce bus bandwidth 75.34 GB/s" in cluster.logs[ip]
        assert (
            (tmp_path / "state" / ip / "fabric_check.py").read_text(encoding="utf-8").startswith('"""The fabric gate')
        )
    assert marker(cluster, SUCCESS)["reason"] == ""


def test_a_fabric_below_its_floor_fails_the_run_with_the_figure_before_the_job(tmp_path):
    ips = ["10.0.5.3", "10.0.5.4"]
    cluster = run(tmp_path, sim_spec(node_count=2), ips, gate="slow", poll_cap=0.2)
    assert cluster.codes == dict.fromkeys(ips, 1)
    assert marker(cluster)["reason"] == (
        "fabric gate failed (exit 1): all-reduce bus bandwidth 4.08 GB/s across 24 ranks, below the floor of 12.5 GB/s"
    )
    assert not list(cluster.out.glob("args.*"))  # the job never started


def test_a_gate_that_cannot_run_collectives_fails_the_run(tmp_path):
    cluster = run(tmp_path, sim_spec(node_count=2), ["10.0.5.5", "10.0.5.6"], gate="silent", poll_cap=0.2)
    assert marker(cluster)["reason"] == (
        "fabric gate failed (exit 1): no result within 900s: a node could not start the check or join its collectives"
    )


def test_the_gate_is_skipped_only_when_asked_for_by_name_or_for_one_node(tmp_path):
    from infra.training.launch import plan_fabric_gate

    skipped = plan_fabric_gate("aws", "p4d.24xlarge", 2, "nccl", skip=True)
    cluster = run(tmp_path, sim_spec(node_count=2, fabric_gate=skipped), ["10.0.5.7", "10.0.5.8"], poll_cap=0.2)
    assert cluster.codes == {"10.0.5.7": 0, "10.0.5.8": 0}, cluster.logs
    assert not list(cluster.out.glob("gate-args.*"))
    assert "fabric gate not run: job.fabricGate.skip is true" in cluster.logs["10.0.5.7"]


# ---- Trainium: rank 0 of torchrun is the node NEURON_RT_ROOT_COMM_ID names (defect 7) ----


def test_trainium_root_comm_id_names_torchruns_rank_0(tmp_path):
    ips = ["10.0.6.20", "10.0.6.3"]  # byte order: 10.0.6.20 < 10.0.6.3
    spec = training_spec("trn1.32xlarge", node_count=2, registry_kms_key_id=None, rendezvous_timeout_seconds=60)
    cluster = run(tmp_path, spec, ips, poll_cap=0.2)
    assert cluster.codes == dict.fromkeys(ips, 0), cluster.logs
    for ip in ips:
        rank = sorted(ips).index(ip)
        args = args_of(cluster, ip)
        assert f"--node-rank={rank}" in args and "--rdzv-backend=static" in args and "--master-addr=10.0.6.20" in args
        assert not any(a.startswith(("--rdzv-endpoint", "--rdzv-id")) for a in args)
        env = (cluster.out / f"env.{ip}").read_text(encoding="utf-8")
        assert "NEURON_RT_ROOT_COMM_ID=10.0.6.20:41000\n" in env
        assert "--backend" in args_of(cluster, ip, "gate-args") and "xla" in args_of(cluster, ip, "gate-args")


# ---- termination from outside ----


def test_a_terminated_node_writes_no_marker_and_leaves_the_rendezvous(tmp_path):
    """SIGTERM is the instance shutting down (teardown, the run guard, a fleet replacement): that owns the run's
    end, and a _FAILED from the replaced generation's rank 0 would end the new generation's run."""
    spec = sim_spec(node_count=1)
    prepare(tmp_path, spec, checkpoint=True)  # real sleeps: the job runs until the node is terminated
    node = start_node(tmp_path, "10.0.7.1", run_seconds=60)
    deadline = time.monotonic() + 30
    while not (tmp_path / "out/args.10.0.7.1").exists():
        assert time.monotonic() < deadline and node.poll() is None, node.stdout.read().decode()
        time.sleep(0.1)
    node.send_signal(signal.SIGTERM)
    assert node.wait(timeout=30) == 143
    # The instance then powers off, and the job's processes go with it: without this the log's pipe stays open
    # until the stand-in job's own 60 s end.
    with contextlib.suppress(ProcessLookupError):  # nothing left running
        os.killpg(node.pid, signal.SIGKILL)
    log = node.stdout.read().decode()
    assert "terminated from outside: no completion marker from this node" in log
    assert list((tmp_path / "s3").iterdir()) == []
    assert list((tmp_path / "fsx/runs/demo-001/hosts" / spec.generation).iterdir()) == []


# ---- the grace period, the export switch, kept nodes, the backstop (unchanged behaviour) ----


def test_grace_period_stops_the_job_before_expiry_and_the_run_ends_normally(tmp_path):
    spec = sim_spec(node_count=1, stop_at_epoch=int(time.time()) + 2, expires_at_epoch=int(time.time()) + 3600)
    started = time.monotonic()
    cluster = run(tmp_path, spec, ["10.0.5.1"], run_seconds=60, checkpoint=True)  # real sleeps: the job's 60 s
    assert cluster.codes == {"10.0.5.1": 0}, cluster.logs
    assert time.monotonic() - started < 30  # stopped by the grace signal, not by the job's own end
    assert (cluster.out / "stopped.10.0.5.1").read_text(encoding="utf-8") == "saved\n"
    assert "expiry grace period reached: asking the workers to save and stop" in cluster.logs["10.0.5.1"]
    assert not (cluster.out / "agent-term.10.0.5.1").exists()  # torchrun itself is left to see its workers end
    assert marker(cluster, SUCCESS)["expires_at"] == spec.expires_at_epoch  # the deployment that wrote it
    assert (cluster.out / "shutdown.10.0.5.1").exists()


def test_a_node_that_starts_after_the_grace_point_still_stops_its_workers(tmp_path):
    # The stopper fires before torchrun has started a worker: it asks again until one hears it.
    spec = sim_spec(node_count=1, stop_at_epoch=int(time.time()) - 60, expires_at_epoch=int(time.time()) + 3600)
    started = time.monotonic()
    cluster = run(tmp_path, spec, ["10.0.5.1"], run_seconds=60, worker_delay=2, checkpoint=True)
    assert cluster.codes == {"10.0.5.1": 0}, cluster.logs
    assert time.monotonic() - started < 30
    assert (cluster.out / "stopped.10.0.5.1").read_text(encoding="utf-8") == "saved\n"


def test_without_export_the_marker_follows_the_exit_code_and_waits_for_nothing(tmp_path):
    spec = sim_spec(node_count=1, export_checkpoints=False, export_timeout_seconds=3600)
    cluster = run(tmp_path, spec, ["10.0.6.1"], lfs_flags="0000000b", checkpoint=True, poll_cap=0.2)
    found = marker(cluster, SUCCESS)
    assert (found["status"], found["checkpoints_exported"]) == ("SUCCESS", False)


def test_kept_nodes_do_not_power_off(tmp_path):
    cluster = run(tmp_path, sim_spec(node_count=1, power_off_on_exit=False), ["10.0.7.1"], poll_cap=0.2)
    assert marker(cluster, SUCCESS)
    assert not (cluster.out / "shutdown.10.0.7.1").exists()


def test_every_node_schedules_its_own_power_off_after_expiry(tmp_path):
    expires = int(time.time()) + 3600
    spec = sim_spec(node_count=1, power_off_on_exit=False, expires_at_epoch=expires)
    cluster = run(tmp_path, spec, ["10.0.8.1"], poll_cap=0.2)
    assert cluster.codes == {"10.0.8.1": 0}, cluster.logs
    args = (cluster.out / "shutdown.10.0.8.1").read_text(encoding="utf-8").split("\n")
    # 3600 s to expiry + 300 s backstop, rounded up to whole minutes (65, or 66 across a second boundary)
    assert args[0] == "-h" and args[1] in ("+65", "+66") and args[2] == "mlinfra: run demo-001 expires"
