"""The training-gcp-demo stack through the offline preview: the compact placement policy, the A3 multi-NIC
layout (nic0 + one VPC per GPU NIC, MTU 8244, gVNIC, no public IPs), the hard lifetime, Managed Lustre in the
nodes' zone, the least-privilege node account; policies pass; cost says what it does not know."""

from __future__ import annotations

import pytest

from infra.tools.offline.engine import preview
from tests.helpers import by_type, one, run_cli

INSTANCE = "gcp:compute/instance:Instance"
NETWORK = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"


@pytest.fixture(scope="module")
def demo():
    return preview("training-gcp-demo")


@pytest.fixture(scope="module")
def mega():
    return preview("training-gcp-demo", overrides=[("mlinfra:training.machineType", "a3-megagpu-8g")])


def test_previews_without_errors_or_unknown_properties(demo):
    assert [d.message for d in demo.errors] == []
    types = {s.type for s in demo.resources()}
    assert {
        "gcp:compute/resourcePolicy:ResourcePolicy",
        INSTANCE,
        NETWORK,
        SUBNET,
        "gcp:compute/firewall:Firewall",
        "gcp:lustre/instance:Instance",
        "gcp:servicenetworking/connection:Connection",
        "gcp:serviceaccount/account:Account",
        "gcp:storage/bucketIAMMember:BucketIAMMember",
    } <= types
    assert not any(t.startswith("aws:") for t in types)


def test_compact_placement_policy_holds_every_node(demo):
    policy = one(demo, "gcp:compute/resourcePolicy:ResourcePolicy")
    assert policy.inputs["groupPlacementPolicy"] == {"collocation": "COLLOCATED", "vmCount": 2}
    nodes = by_type(demo, INSTANCE)
    assert len(nodes) == 2
    assert all(policy.urn in n.property_dependencies["resourcePolicies"] for n in nodes)


def _layout(result):
    subnets = {s.urn: s.inputs for s in by_type(result, SUBNET)}
    nets = by_type(result, NETWORK)
    return subnets, nets


@pytest.mark.parametrize("which, gpu_nics", [("demo", 4), ("mega", 8)])
def test_multi_nic_layout_one_vpc_per_gpu_nic(which, gpu_nics, request):
    result = request.getfixturevalue(which)
    subnets, nets = _layout(result)
    assert len(nets) == 1 + gpu_nics and {n.inputs["mtu"] for n in nets} == {8244}
    for node in by_type(result, INSTANCE):
        nics = node.inputs["networkInterfaces"]
        assert len(nics) == 1 + gpu_nics
        assert all(n["nicType"] == "GVNIC" and "accessConfigs" not in n for n in nics)
        linked = node.property_dependencies["networkInterfaces"]
        assert len([u for u in linked if u in subnets]) == 1 + gpu_nics  # every NIC on a subnet of its own
    firewalls = by_type(result, "gcp:compute/firewall:Firewall")
    assert len(firewalls) == 1 + gpu_nics
    cidrs = sorted(s["ipCidrRange"] for s in subnets.values())
    assert all(f.inputs["sourceRanges"][0] in cidrs for f in firewalls)  # internal only


def test_hard_lifetime_and_gpu_host_maintenance(demo):
    for node in by_type(demo, INSTANCE):
        inputs = node.inputs
        expires = inputs["labels"]["mlinfra-expires-at"]
        scheduling = inputs["scheduling"]
        assert scheduling["terminationTime"].lower().replace(":", "-") == expires
        assert scheduling["instanceTerminationAction"] == "DELETE"
        assert scheduling["onHostMaintenance"] == "TERMINATE" and scheduling["automaticRestart"] is False
        assert inputs["shieldedInstanceConfig"] == {
            "enableSecureBoot": False,
            "enableVtpm": True,
            "enableIntegrityMonitoring": True,
        }
        assert inputs["labels"]["mlinfra-run-id"] == "demo-llama-7b-gcp-001"
        assert "gcloud storage cp" in inputs["metadataStartupScript"]


def test_managed_lustre_in_the_nodes_zone(demo):
    lustre = one(demo, "gcp:lustre/instance:Instance").inputs
    zones = {n.inputs["zone"] for n in by_type(demo, INSTANCE)}
    assert zones == {lustre["location"]} == {"us-central1-a"}
    assert (lustre["capacityGib"], lustre["perUnitStorageThroughput"]) == ("9000", "1000")


def test_node_account_reads_datasets_and_writes_run_prefixes_only(demo):
    grants = {
        g.inputs["role"]: g.inputs["condition"]["expression"]
        for g in by_type(demo, "gcp:storage/bucketIAMMember:BucketIAMMember")
        if g.inputs["member"].startswith("serviceAccount:train-")
    }
    base = "resource.name.startsWith('projects/_/buckets/mlinfra-training-demo/objects/"
    assert grants["roles/storage.objectCreator"] == (
        f"{base}checkpoints/demo-llama-7b-gcp-001/') || {base}runs/demo-llama-7b-gcp-001/')"
    )
    assert grants["roles/storage.objectViewer"].startswith(f"{base}datasets/') || ")


def test_policy_check_passes():
    done = run_cli("policy", "--stack", "training-gcp-demo")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 mandatory, 0 advisory" in done.stdout


def test_cost_prices_the_nodes_and_says_what_is_unknown():
    done = run_cli("cost", "--stack", "training-gcp-demo")
    assert done.returncode == 0, done.stderr
    assert "1 x a3-highgpu-8g at $88.490/h" in done.stdout
    assert "Managed Lustre 9000 GiB at 1000 MB/s/TiB: unknown (no sourced price for this tier" in done.stdout
    assert "the totals are lower bounds" in done.stdout
