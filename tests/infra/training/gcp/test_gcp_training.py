"""GCP training config, plan and bootstrap: loads, meaning errors name the field, the A3 NIC layout, Managed
Lustre sizing, label-safe expiry, and the startup script pinned by a golden file (and shellcheck)."""

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from infra.catalog.fabric import gcp_net_plugin
from infra.core.errors import InputError
from infra.core.labels import expires_at_from_label, gcp_labels
from infra.kinds import load
from infra.training.gcp.config import GcpTrainingSpec
from infra.training.gcp.lustre import size_managed_lustre
from infra.training.gcp.plan import plan_gcp_training
from infra.training.gcp.startup import GcpNodeBootstrap, render_startup_script
from infra.training.launch import plan_fabric_gate
from infra.training.lustre import LustreIntent
from tests.helpers import shellcheck

P = "mlinfra:training."
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
GOLDEN = Path(__file__).parent / "golden" / "userdata_gcp_a3high.sh"


def spec(**changes):
    return {
        "runId": "run-1",
        "machineType": "a3-highgpu-8g",
        "nodeCount": 2,
        "zone": "us-central1-a",
        "dataBucket": "mlinfra-training-demo",
        "image": "projects/p/global/images/family/a3",
        **changes,
    }


def flat(**changes):
    return {
        "gcp:project": "mlinfra-demo-project",
        "gcp:region": "us-central1",
        "mlinfra:kind": "training",
        "mlinfra:cloud": "gcp",
        "mlinfra:training": spec(**changes),
    }


def problems(values):
    with pytest.raises(InputError) as error:
        load(values)
    return [(p.path, p.message) for p in error.value.problems]


def test_gcp_training_loads():
    config = load(flat())
    assert (config.kind, config.cloud, config.training.machine_type, config.training.lifecycle.ttl_hours) == (
        "training",
        "gcp",
        "a3-highgpu-8g",
        24,
    )


@pytest.mark.parametrize(
    "values, expected",
    [
        (
            flat(machineType="g2-standard-8"),
            [
                (
                    P + "machineType",
                    "g2-standard-8 is not a training type (no GPU NICs for GPUDirect); training takes: "
                    "a3-highgpu-8g, a3-megagpu-8g",
                )
            ],
        ),
        (
            flat(machineType="a3-highgpu-9g"),
            [
                (
                    P + "machineType",
                    "unknown GCP machine type 'a3-highgpu-9g'; closest known: a3-highgpu-8g, a2-highgpu-8g, "
                    "a2-highgpu-4g",
                )
            ],
        ),
        (
            flat(zone="us-east1-b"),
            [(P + "zone", "us-east1-b is not a zone of gcp:region us-central1; use a zone such as us-central1-a")],
        ),
        (
            flat(zone="us-central1-f"),
            [
                (
                    P + "zone",
                    "us-central1-f does not offer a3-highgpu-8g; zones that do: "
                    "us-central1-a, us-central1-b, us-central1-c",
                )
            ],
        ),
        (
            {**flat(zone=None), "gcp:region": "europe-west4"},
            [
                (
                    P + "zone",
                    "required: the catalog does not record a3-highgpu-8g's zones in europe-west4 (it knows "
                    "us-central1); "
                    "name a zone that offers it",
                )
            ],
        ),
        (flat(nodeCount=0), [(P + "nodeCount", "must be at least 1 (got 0)")]),
        (
            flat(network={"gpuCidr": "10.64.0.0/16"}),
            [(P + "network.gpuCidr", "10.64.0.0/16 overlaps network.cidr (10.64.0.0/20); the ranges must not overlap")],
        ),
        (
            flat(lustre={"perUnitStorageThroughput": 500, "capacityGib": 9000}),
            [
                (
                    P + "lustre.capacityGib",
                    "9000 GiB is not a Managed Lustre capacity at 500 MB/s/TiB; use at least 18000 GiB in "
                    "steps of 18000 GiB",
                )
            ],
        ),
        (
            flat(lustre={"perUnitStorageThroughput": 300}),
            [(P + "lustre.perUnitStorageThroughput", "must be one of 125, 250, 500, 1000 (got 300)")],
        ),
        (
            flat(dataBucket="Not_A_Bucket"),
            [
                (
                    P + "dataBucket",
                    "String should match pattern '^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$' (got 'Not_A_Bucket')",
                )
            ],
        ),
        (flat(lifecycle={"ttlHours": 400}), [(P + "lifecycle.ttlHours", "must be at most 336.0 (got 400)")]),
    ],
)
def test_meaning_and_shape_errors_name_the_field(values, expected):
    if values["mlinfra:training"].get("zone") is None:
        values["mlinfra:training"].pop("zone")
    assert problems(values) == expected


def test_config_error_exits_2_naming_the_field():
    from tests.helpers import run_cli

    done = run_cli("preview", "--stack", "training-gcp-demo", "-c", "mlinfra:training.machineType=g2-standard-8")
    assert done.returncode == 2
    assert "mlinfra:training.machineType: g2-standard-8 is not a training type" in done.stderr + done.stdout
    assert "Traceback" not in done.stderr


def plan(**changes):
    return plan_gcp_training(
        GcpTrainingSpec.model_validate(spec(**changes)), "us-central1", "training-gcp-demo", now=NOW, dry_run=True
    )


@pytest.mark.parametrize("mtype, nics", [("a3-highgpu-8g", 4), ("a3-megagpu-8g", 8)])
def test_one_gpu_vpc_subnet_per_gpu_nic(mtype, nics):
    layout = plan(machineType=mtype).gpu_nics
    assert [n.index for n in layout] == list(range(1, nics + 1))
    assert [n.cidr for n in layout][:2] == ["10.128.0.0/20", "10.128.16.0/20"] and len({n.cidr for n in layout}) == nics


def test_lifetime_labels_and_expiry():
    p = plan()
    assert p.expires_at == "2026-03-02T12:00:00Z" and p.expires_at_provisional and p.termination_time == p.expires_at
    assert p.labels == {
        "mlinfra-role": "training",
        "mlinfra-stack": "training-gcp-demo",
        "mlinfra-run-id": "run-1",
        "mlinfra-expires-at": "2026-03-02t12-00-00z",
    }
    assert expires_at_from_label(p.labels["mlinfra-expires-at"]) == p.expires_at


def test_an_expired_run_is_refused_by_up():
    with pytest.raises(InputError) as error:
        plan_gcp_training(
            GcpTrainingSpec.model_validate(spec(lifecycle={"expiresAt": "2026-03-01T11:00:00Z"})),
            "us-central1",
            "s",
            now=NOW,
            dry_run=False,
        )
    assert error.value.problems[0].path == P + "lifecycle.expiresAt"


def test_labels_are_gcp_safe():
    assert gcp_labels({"mlinfra:stack": "org/Training-X"}) == {"mlinfra-stack": "org-training-x"}


def test_managed_lustre_sizing_from_the_same_intents():
    small = size_managed_lustre(LustreIntent(1200, 200, 300, 5))
    assert (small.per_unit_storage_throughput, small.capacity_gib) == (1000, 9000)
    # 320 Gbit/s (40,000 MB/s) of reads: 1000 MB/s/TiB needs 40,960 GiB -> 45,000 (steps of 9,000)
    big = size_managed_lustre(LustreIntent(1200, 200, 300, 320))
    assert (big.per_unit_storage_throughput, big.capacity_gib) == (1000, 45000)
    assert big.aggregate_throughput_mbps >= 40000
    pinned = size_managed_lustre(LustreIntent(1200, 200, 300, 5), tier=250)
    assert (pinned.per_unit_storage_throughput, pinned.capacity_gib) == (250, 36000)


def bootstrap(**changes):
    values = dict(
        run_id="demo-llama-7b-gcp-001",
        node_count=2,
        generation="a3-highgpu-8g-x2-us-central1-a",
        fabric_gate=plan_fabric_gate("gcp", "a3-highgpu-8g", 2, "nccl", False),
        gpus_per_node=8,
        gpu_nics=4,
        machine_type="a3-highgpu-8g",
        gpu_subnets=("10.128.0.0/20", "10.128.16.0/20", "10.128.32.0/20", "10.128.48.0/20"),
        net_plugin=gcp_net_plugin("a3-highgpu-8g"),
        lustre_mount_point="192.0.2.20@tcp:/mlinfra",
        bucket="mlinfra-training-demo",
        command=("/fsx/datasets/code/train.py", "--config", "/fsx/datasets/code/llama-7b.yaml"),
        stop_at_epoch=1795334400,
        expires_at_epoch=1795335300,
    )
    values.update(changes)
    return GcpNodeBootstrap(**values)


def test_startup_script_matches_golden():
    rendered = render_startup_script(bootstrap())
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.write_bytes(rendered.encode())
    assert GOLDEN.read_bytes() == rendered.encode()


def test_startup_script_uses_gcp_parts_and_shares_the_rest():
    script = render_startup_script(bootstrap())
    for gcp_part in (
        "Metadata-Flavor: Google",
        "network-interfaces/0/ip",
        "MLINFRA_GPU_NICS=4",
        'gcloud storage cp - "${MLINFRA_MARKER_URI}/_${status}"',
        "MLINFRA_MARKER_URI=gs://mlinfra-training-demo/runs/demo-llama-7b-gcp-001",
        "MLINFRA_CHECKPOINTS_URI=gs://mlinfra-training-demo/checkpoints/demo-llama-7b-gcp-001",
        "MLINFRA_LUSTRE_SOURCE=192.0.2.20@tcp:/mlinfra",
    ):
        assert gcp_part in script
    for shared in ("--rdzv-backend=static", "trap on_exit EXIT", "mount -t lustre", "--nproc-per-node"):
        assert shared in script
    for aws_only in ("169.254.169.254", "aws s3", "EFA", "launch template", "FI_PROVIDER"):
        assert aws_only not in script


def test_bootstrap_rejects_bad_values():
    with pytest.raises(
        ValueError, match=r"gpu_nics must be a whole number >= 0 \(got -1\); lustre_mount_point must read"
    ):
        bootstrap(gpu_nics=-1, lustre_mount_point="nowhere")
    with pytest.raises(ValueError, match="env key 'MLINFRA_X' is reserved"):
        bootstrap(env={"MLINFRA_X": "1"})


def mega():
    """The same run on a3-megagpu-8g: 8 GPU NICs with GPUDirect-TCPXO."""
    return bootstrap(
        generation="a3-megagpu-8g-x2-us-central1-a",
        gpu_nics=8,
        machine_type="a3-megagpu-8g",
        gpu_subnets=tuple(f"10.128.{16 * i}.0/20" for i in range(8)),
        net_plugin=gcp_net_plugin("a3-megagpu-8g"),
        fabric_gate=plan_fabric_gate("gcp", "a3-megagpu-8g", 2, "nccl", False),
    )


@pytest.mark.parametrize("spec", [bootstrap, mega], ids=["a3-highgpu-8g", "a3-megagpu-8g"])
def test_startup_script_passes_shellcheck(tmp_path, spec):
    path = tmp_path / "startup.sh"
    path.write_text(render_startup_script(spec()), encoding="utf-8")
    done = shellcheck(path)
    assert done.returncode == 0, done.stdout
