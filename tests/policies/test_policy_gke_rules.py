"""GKE rules (private nodes, no public node IPs, Workload Identity, shielded nodes) and the accelerator
taint rule on GKE node pools: the compliant stack passes; each broken field gives its exact message; the
runner fails (exit 1) on a broken preview document of the real serving-gcp-demo stack."""

import copy
import json

import pytest

from policies.model import Resource
from policies.rules.serving import (
    accelerator_node_pools_tainted,
    gke_node_pools_without_public_ip,
    gke_nodes_private,
    gke_shielded_nodes,
    gke_workload_identity_enabled,
)
from tests.helpers import run_cli

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
STACK = "serving-gcp-demo"


def urn(type_, name):
    return f"urn:pulumi:{STACK}::mlinfra::{type_}::{name}"


def cluster(**changes):
    props = {
        "privateClusterConfig": {"enablePrivateNodes": True, "masterIpv4CidrBlock": "172.16.0.0/28"},
        "workloadIdentityConfig": {"workloadPool": "p.svc.id.goog"},
        "enableShieldedNodes": True,
        **changes,
    }
    return Resource(CLUSTER, props, urn=urn(CLUSTER, "gke"), name="gke")


def pool(**node_config):
    config = {
        "machineType": "g2-standard-8",
        "guestAccelerators": [{"type": "nvidia-l4", "count": 1}],
        "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}],
        "shieldedInstanceConfig": {"enableSecureBoot": True, "enableIntegrityMonitoring": True},
        "workloadMetadataConfig": {"mode": "GKE_METADATA"},
    }
    network = node_config.pop("networkConfig", {"enablePrivateNodes": True})
    config.update(node_config)
    return Resource(
        NODE_POOL,
        {"nodeConfig": {k: v for k, v in config.items() if v is not None}, "networkConfig": network},
        urn=urn(NODE_POOL, "l4"),
        name="l4",
    )


MODULES = [
    gke_nodes_private,
    gke_node_pools_without_public_ip,
    gke_workload_identity_enabled,
    gke_shielded_nodes,
    accelerator_node_pools_tainted,
]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.NAME)
def test_compliant_resources_pass(module):
    for resource in (cluster(), pool()):
        if module.RULE.applies_to(resource.type):
            assert module.check(resource) == []


@pytest.mark.parametrize(
    "module, resource, expected",
    [
        (
            gke_nodes_private,
            cluster(privateClusterConfig={"enablePrivateNodes": False}),
            "privateClusterConfig.enablePrivateNodes is not true, so every node gets a public IP address; set "
            "enablePrivateNodes true (with a masterIpv4CidrBlock) and give the nodes egress through Cloud NAT",
        ),
        (
            gke_nodes_private,
            cluster(privateClusterConfig=None),
            "privateClusterConfig.enablePrivateNodes is not true, so every node gets a public IP address; set "
            "enablePrivateNodes true (with a masterIpv4CidrBlock) and give the nodes egress through Cloud NAT",
        ),
        (
            gke_node_pools_without_public_ip,
            pool(networkConfig={"enablePrivateNodes": "false"}),
            "networkConfig.enablePrivateNodes is false, so this pool's nodes get public IP addresses; remove "
            "it or set it "
            "true (nodes reach the internet through Cloud NAT)",
        ),
        (
            gke_workload_identity_enabled,
            cluster(workloadIdentityConfig=None),
            "workloadIdentityConfig.workloadPool is not set, so pods can only act as the nodes' service account; set "
            "workloadPool to '<project>.svc.id.goog'",
        ),
        (
            gke_workload_identity_enabled,
            pool(workloadMetadataConfig={"mode": "GCE_METADATA"}),
            "nodeConfig.workloadMetadataConfig.mode is not GKE_METADATA, so pods on this pool read the node's "
            "credentials "
            "from the metadata server; set mode GKE_METADATA",
        ),
        (
            gke_shielded_nodes,
            cluster(enableShieldedNodes=False),
            "enableShieldedNodes is false; set it true so every node proves its identity with a Shielded VM",
        ),
        (
            gke_shielded_nodes,
            pool(shieldedInstanceConfig={"enableIntegrityMonitoring": True}),
            "nodeConfig.shieldedInstanceConfig.enableSecureBoot is not true (GKE's default is off); set it "
            "true so nodes "
            "boot only signed components",
        ),
        (
            accelerator_node_pools_tainted,
            pool(taints=None),
            "accelerator pool has no nvidia.com/gpu taint with effect NO_SCHEDULE in nodeConfig.taints; add it so only "
            "pods requesting nvidia.com/gpu are scheduled here",
        ),
    ],
)
def test_broken_field_gives_its_exact_message(module, resource, expected):
    assert module.RULE.applies_to(resource.type)
    assert module.check(resource) == [expected]


def test_pool_without_accelerators_needs_no_taint():
    assert accelerator_node_pools_tainted.check(pool(guestAccelerators=None, taints=None)) == []


# --- the runner on the real stack -----------------------------------------------------------------


@pytest.fixture(scope="module")
def document():
    done = run_cli("preview", "--stack", STACK, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_stack_passes_the_pack():
    done = run_cli("policy", "--stack", STACK)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 mandatory" in done.stdout


def _broken(document, type_, family, mutate):
    broken = copy.deepcopy(document)
    for step in broken["steps"]:
        state = step["newState"]
        if state["type"] == type_ and (family is None or step["urn"].endswith(f"pool-{family}-pool")):
            mutate(state["inputs"])
    return broken


@pytest.mark.parametrize(
    "type_, family, mutate, policy, message",
    [
        (
            CLUSTER,
            None,
            lambda i: i["privateClusterConfig"].update(enablePrivateNodes=False),
            "gke-nodes-private",
            "privateClusterConfig.enablePrivateNodes is not true",
        ),
        (
            NODE_POOL,
            "l4",
            lambda i: i["networkConfig"].update(enablePrivateNodes=False),
            "gke-node-pools-without-public-ip",
            "networkConfig.enablePrivateNodes is false",
        ),
        (
            CLUSTER,
            None,
            lambda i: i.pop("workloadIdentityConfig"),
            "gke-workload-identity-enabled",
            "workloadIdentityConfig.workloadPool is not set",
        ),
        (
            NODE_POOL,
            "l4",
            lambda i: i["nodeConfig"]["shieldedInstanceConfig"].update(enableSecureBoot=False),
            "gke-shielded-nodes",
            "nodeConfig.shieldedInstanceConfig.enableSecureBoot is not true",
        ),
    ],
)
def test_runner_exits_1_naming_the_rule(tmp_path, document, type_, family, mutate, policy, message):
    path = tmp_path / "preview.json"
    path.write_text(json.dumps(_broken(document, type_, family, mutate)), encoding="utf-8")
    done = run_cli("policy", "--preview-json", str(path), "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    found = [v for v in json.loads(done.stdout)["violations"] if v["policy"] == policy]
    assert len(found) == 1 and found[0]["enforcement"] == "mandatory" and found[0]["message"].startswith(message)


def test_missing_taint_is_advisory(tmp_path, document):
    path = tmp_path / "preview.json"
    path.write_text(
        json.dumps(_broken(document, NODE_POOL, "l4", lambda i: i["nodeConfig"].pop("taints"))), encoding="utf-8"
    )
    done = run_cli("policy", "--preview-json", str(path), "--json")
    assert done.returncode == 0
    assert [v["policy"] for v in json.loads(done.stdout)["violations"]] == ["accelerator-node-pools-tainted"]
