"""GCP training rules: compact placement, no public IPs, the hard end by expiry, the complete GPU NIC layout and
the run labels. The compliant stack passes; each broken field gives its exact message; the runner exits 1 on a
broken preview document of the real training-gcp-demo stack."""

import copy
import json
from datetime import UTC, datetime

import pytest

from policies.model import Resource, Stack
from policies.rules.everywhere import gcp_instances_without_public_ip
from policies.rules.training import (
    gcp_training_nodes_end_by_expiry,
    gcp_training_nodes_have_every_gpu_nic,
    gcp_training_nodes_in_compact_placement,
    gcp_training_resources_labelled_with_run,
)
from tests.helpers import run_cli

INSTANCE = "gcp:compute/instance:Instance"
POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"
LUSTRE = "gcp:lustre/instance:Instance"
STACK = "training-gcp-demo"
LABELS = {
    "mlinfra-role": "training",
    "mlinfra-stack": STACK,
    "mlinfra-run-id": "run-1",
    "mlinfra-expires-at": "2026-03-02t12-00-00z",
}
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def urn(type_, name):
    return f"urn:pulumi:{STACK}::mlinfra::{type_}::{name}"


def placement(**policy):
    return Resource(
        POLICY,
        {"groupPlacementPolicy": {"collocation": "COLLOCATED", "vmCount": 2, **policy}},
        urn=urn(POLICY, "compact"),
        name="compact",
    )


def node(i=0, labels=None, policy_urn=None, nics=None, **props):
    policy_urn = policy_urn or urn(POLICY, "compact")
    nics = nics if nics is not None else [{"subnetwork": f"sub-{n}", "nicType": "GVNIC"} for n in range(5)]
    inputs = {
        "machineType": "a3-highgpu-8g",
        "networkInterfaces": nics,
        "labels": LABELS if labels is None else labels,
        "resourcePolicies": "self-link",
        "scheduling": {
            "terminationTime": "2026-03-02T12:00:00Z",
            "instanceTerminationAction": "DELETE",
            "onHostMaintenance": "TERMINATE",
        },
        **props,
    }
    deps = {"resourcePolicies": (policy_urn,)} if policy_urn else {}
    return Resource(
        INSTANCE,
        inputs,
        urn=urn(INSTANCE, f"node-{i}"),
        name=f"node-{i}",
        dependencies=tuple(deps.get("resourcePolicies", ())),
        property_dependencies=deps,
    )


def lustre(labels=None):
    return Resource(LUSTRE, {"labels": LABELS if labels is None else labels}, urn=urn(LUSTRE, "fs"), name="fs")


def stack(*resources):
    return Stack(resources or (placement(), node(0), node(1), lustre()))


def test_compliant_stack_passes():
    s = stack()
    assert gcp_training_nodes_in_compact_placement.check(s, {}) == []
    assert gcp_training_resources_labelled_with_run.check(s, {}) == []
    for r in s.of_type(INSTANCE):
        assert gcp_instances_without_public_ip.check(r) == []
        assert gcp_training_nodes_have_every_gpu_nic.check(r) == []
        assert gcp_training_nodes_end_by_expiry.check(r, now=NOW) == []


@pytest.mark.parametrize(
    "resource, expected",
    [
        (
            node(
                nics=[{"subnetwork": "sub-0", "nicType": "GVNIC", "accessConfigs": [{}]}]
                + [{"subnetwork": f"sub-{n}", "nicType": "GVNIC"} for n in range(1, 5)]
            ),
            "networkInterfaces[0].accessConfigs gives the instance a public address; remove it (nodes reach "
            "Google APIs "
            "through Private Google Access and the internet through Cloud NAT)",
        ),
    ],
)
def test_public_ip_exact_message(resource, expected):
    assert gcp_instances_without_public_ip.check(resource) == [expected]


@pytest.mark.parametrize(
    "nics, expected",
    [
        (
            [{"subnetwork": f"sub-{n}", "nicType": "GVNIC"} for n in range(3)],
            "a3-highgpu-8g has 4 GPU NICs but the instance declares 3 network interfaces; declare nic0 plus 4 "
            "more, each on "
            "the subnet of its own GPU VPC (as in Google's A3 blueprints)",
        ),
        (
            [{"subnetwork": "sub-0", "nicType": "GVNIC"}] * 5,
            "two network interfaces share a subnet; every GPU NIC needs the subnet of its own VPC",
        ),
        (
            [{"subnetwork": f"sub-{n}", "nicType": "VIRTIO_NET" if n == 2 else "GVNIC"} for n in range(5)],
            "networkInterfaces[2].nicType is not GVNIC; set nicType GVNIC on every interface (A3 GPU NICs need gVNIC)",
        ),
    ],
)
def test_gpu_nic_layout_exact_messages(nics, expected):
    assert gcp_training_nodes_have_every_gpu_nic.check(node(nics=nics)) == [expected]


FIX = "set scheduling.terminationTime to the run's expiry (2026-03-02T12:00:00Z) and instanceTerminationAction DELETE"


@pytest.mark.parametrize(
    "scheduling, expected",
    [
        (
            {"onHostMaintenance": "TERMINATE"},
            f"the node has no hard end (scheduling.terminationTime or maxRunDuration); {FIX}",
        ),
        (
            {"terminationTime": "2026-03-03T12:00:00Z", "instanceTerminationAction": "DELETE"},
            f"scheduling.terminationTime 2026-03-03T12:00:00Z is after the run's expiry 2026-03-02T12:00:00Z; {FIX}",
        ),
        (
            {"terminationTime": "2026-03-02T12:00:00Z", "instanceTerminationAction": "STOP"},
            f"scheduling.instanceTerminationAction is 'STOP', so at its end the node is only stopped and keeps "
            f"its disks; {FIX}",
        ),
        (
            {"maxRunDuration": {"seconds": 200000}, "instanceTerminationAction": "DELETE"},
            f"scheduling.maxRunDuration of 200000 s ends after the run's expiry 2026-03-02T12:00:00Z (86400 s "
            f"from now); {FIX}",
        ),
    ],
)
def test_end_by_expiry_exact_messages(scheduling, expected):
    assert gcp_training_nodes_end_by_expiry.check(node(scheduling=scheduling), now=NOW) == [expected]


def test_a_max_run_duration_within_the_expiry_passes():
    ok = node(scheduling={"maxRunDuration": {"seconds": 86000}, "instanceTerminationAction": "DELETE"})
    assert gcp_training_nodes_end_by_expiry.check(ok, now=NOW) == []


def test_compact_placement_exact_messages():
    loose = Stack([placement(collocation=None), node(0), node(1)])
    assert [f.message for f in gcp_training_nodes_in_compact_placement.check(loose, {})] == [
        f"training node 'node-{i}' is in no compact placement policy; set resourcePolicies to a {POLICY} with "
        "groupPlacementPolicy collocation COLLOCATED and vmCount = the node count"
        for i in (0, 1)
    ]
    wrong = Stack([placement(vmCount=4), node(0), node(1)])
    assert [f.message for f in gcp_training_nodes_in_compact_placement.check(wrong, {})] == [
        "placement policy 'compact' has vmCount 4 but 2 training nodes use it; set vmCount 2"
    ]


def test_run_labels_exact_messages():
    missing = Stack([placement(), node(0), lustre(labels={"mlinfra-role": "training"})])
    assert [f.message for f in gcp_training_resources_labelled_with_run.check(missing, {})] == [
        "'fs' lacks the run's labels mlinfra-stack, mlinfra-run-id, mlinfra-expires-at; label every node and the file "
        "system with the contract tags in GCP label form"
    ]
    bad = Stack([node(0, labels={**LABELS, "mlinfra-expires-at": "tomorrow"})])
    assert [f.message for f in gcp_training_resources_labelled_with_run.check(bad, {})] == [
        "'node-0' has mlinfra-expires-at 'tomorrow', which is not a UTC time in label form (e.g. 2026-11-22t08-00-00z)"
    ]


# --- the runner on the real stack -----------------------------------------------------------------


@pytest.fixture(scope="module")
def document():
    done = run_cli("preview", "--stack", STACK, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _broken(document, type_, mutate):
    broken = copy.deepcopy(document)
    for step in broken["steps"]:
        if step["newState"]["type"] == type_:
            mutate(step["newState"]["inputs"])
    return broken


@pytest.mark.parametrize(
    "type_, mutate, policy, message",
    [
        (
            POLICY,
            lambda i: i["groupPlacementPolicy"].update(vmCount=3),
            "gcp-training-nodes-in-compact-placement",
            "placement policy",
        ),
        (
            INSTANCE,
            lambda i: i["networkInterfaces"][0].update(accessConfigs=[{"natIp": ""}]),
            "gcp-instances-without-public-ip",
            "networkInterfaces[0].accessConfigs gives the instance a public address",
        ),
        (
            INSTANCE,
            lambda i: i["scheduling"].pop("terminationTime"),
            "gcp-training-nodes-end-by-expiry",
            "the node has no hard end",
        ),
        (
            INSTANCE,
            lambda i: i["networkInterfaces"].pop(),
            "gcp-training-nodes-have-every-gpu-nic",
            "a3-highgpu-8g has 4 GPU NICs but the instance declares 4 network interfaces",
        ),
        (LUSTRE, lambda i: i["labels"].pop("mlinfra-run-id"), "gcp-training-resources-labelled-with-run", "'run-"),
    ],
)
def test_runner_exits_1_naming_the_rule(tmp_path, document, type_, mutate, policy, message):
    path = tmp_path / "preview.json"
    path.write_text(json.dumps(_broken(document, type_, mutate)), encoding="utf-8")
    done = run_cli("policy", "--preview-json", str(path), "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    found = [v for v in json.loads(done.stdout)["violations"] if v["policy"] == policy]
    assert found and found[0]["enforcement"] == "mandatory" and found[0]["message"].startswith(message)
