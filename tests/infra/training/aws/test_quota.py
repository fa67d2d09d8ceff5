"""The run's quota arithmetic (pure): what a run adds to each quota, and the verdict with what is in use."""

from __future__ import annotations

import pytest

from infra.catalog.aws.quotas import network_interface_quota, vcpu_quota
from infra.training.aws.config import TrainingSpec
from infra.training.aws.quota import QuotaNeed, QuotaVerdict, run_quota_needs, unchecked_vcpu_reason


def spec(instance_type: str = "p4d.24xlarge", nodes: int = 4, network: dict | None = None, **capacity) -> TrainingSpec:
    return TrainingSpec.model_validate(
        {
            "runId": "quota-run-001",
            "instanceType": instance_type,
            "nodeCount": nodes,
            "capacity": capacity or {"mode": "on-demand"},
            "network": network or {},
            "job": {"command": ["python", "train.py"]},
        }
    )


@pytest.mark.parametrize(
    ("instance_type", "nodes", "vcpus", "interfaces", "per_node"),
    [
        ("p4d.24xlarge", 4, 384, 21, "5 interfaces each: 1 ENA and 4 EFA, and 1 of the NAT gateway"),
        ("p5.48xlarge", 4, 768, 133, "33 interfaces each: 1 ENA and 32 EFA, and 1 of the NAT gateway"),
        ("trn1.32xlarge", 2, 256, 19, "9 interfaces each: 1 ENA and 8 EFA, and 1 of the NAT gateway"),
        ("trn2.48xlarge", 16, 3072, 273, "17 interfaces each: 1 ENA and 16 EFA, and 1 of the NAT gateway"),
    ],
)
def test_needs_are_nodes_times_vcpus_and_nodes_times_interfaces(instance_type, nodes, vcpus, interfaces, per_node):
    cpu, eni = run_quota_needs(spec(instance_type, nodes))
    assert (cpu.quota, cpu.planned, cpu.unit) == (vcpu_quota(instance_type), vcpus, "vCPUs")
    assert cpu.basis == f"{nodes} x {instance_type} at {vcpus // nodes} vCPUs each"
    assert (eni.quota, eni.planned, eni.unit) == (network_interface_quota(), interfaces, "network interfaces")
    assert eni.basis == f"{nodes} nodes x {per_node}"


@pytest.mark.parametrize(
    ("network", "planned", "basis"),
    [
        ({"egress": "nat"}, 21, "4 nodes x 5 interfaces each: 1 ENA and 4 EFA, and 1 of the NAT gateway"),
        ({"egress": "endpoints"}, 27, "4 nodes x 5 interfaces each: 1 ENA and 4 EFA, and 7 of the interface endpoints"),
        (
            {"vpcId": "vpc-0123456789abcdef0", "subnetId": "subnet-0123456789abcdef0"},
            20,
            "4 nodes x 5 interfaces each: 1 ENA and 4 EFA",
        ),
    ],
)
def test_the_networks_own_interfaces_count(network, planned, basis):
    (_, eni) = run_quota_needs(spec(network=network))
    assert (eni.planned, eni.basis) == (planned, basis)


@pytest.mark.parametrize("mode", ["odcr", "capacity-block"])
def test_a_reservation_run_is_not_checked_for_vcpus_but_for_interfaces(mode):
    run = spec(mode=mode, reservationId="cr-0123456789abcdef0", reservedCount=4)
    (eni,) = run_quota_needs(run)
    assert eni.quota == network_interface_quota()
    assert unchecked_vcpu_reason(run) == (
        f"capacity.mode {mode}: the nodes launch into their reservation, not on the On-Demand vCPU quota"
    )
    assert unchecked_vcpu_reason(spec()) is None


def test_running_vcpus_of_the_family_count_towards_the_quota():
    (cpu, _) = run_quota_needs(spec())
    assert not QuotaVerdict(cpu, 400.0, 0).exceeded  # 384 of 400
    over = QuotaVerdict(cpu, 400.0, 96)  # one p4d.24xlarge already running: 480 of 400
    assert (over.total, over.exceeded) == (480, True)
    assert QuotaVerdict(cpu, 480.0, 96).exceeded is False  # exactly at the quota fits


def test_the_refusal_names_the_quota_the_figures_and_the_command():
    (cpu, eni) = run_quota_needs(spec())
    assert str(QuotaVerdict(cpu, 400.0, 96).problem("us-east-1")) == (
        "mlinfra:training.nodeCount: this run needs 384 vCPUs (4 x p4d.24xlarge at 96 vCPUs each) of quota "
        "'Running On-Demand P instances' (ec2 L-417A185B) in us-east-1, 96 already in use in the Region: 480 in all, "
        "over the quota's 400. Raise the quota with `aws service-quotas request-service-quota-increase --service-code "
        "ec2 --quota-code L-417A185B --desired-value 480 --region us-east-1`, or lower nodeCount (nothing was deployed)"
    )
    assert str(QuotaVerdict(eni, 18.0, None).problem("eu-west-1")) == (
        "mlinfra:training.nodeCount: this run needs 21 network interfaces (4 nodes x 5 interfaces each: 1 ENA and "
        "4 EFA, and 1 of the NAT gateway) of quota 'Network interfaces per Region' (vpc L-DF5E4CA3) in eu-west-1, "
        "in use could not be counted: 21 in all, over the quota's 18. Raise the quota with `aws service-quotas "
        "request-service-quota-increase --service-code vpc --quota-code L-DF5E4CA3 --desired-value 21 --region "
        "eu-west-1`, or lower nodeCount (nothing was deployed)"
    )


def test_summary_of_a_quota_that_fits():
    need = QuotaNeed(
        network_interface_quota(), 20, "4 nodes x 5 interfaces each: 1 ENA and 4 EFA", "network interfaces"
    )
    assert QuotaVerdict(need, 5000.0, 7).summary() == (
        "quota 'Network interfaces per Region' (vpc L-DF5E4CA3): 27 of 5000 network interfaces (20 for this run: "
        "4 nodes x 5 interfaces each: 1 ENA and 4 EFA; 7 in use)"
    )
