"""Cost of hand-written previews: each resource kind priced from the data files, unknown prices said
so, the run guard per run, and the idle tail from the lifecycle's limits."""

from __future__ import annotations

import math

import pytest

from infra.catalog.services import no_charge_reason, service_price
from infra.tools.cost.estimate import estimate
from infra.training import limits
from tests.infra.tools.cost.cost_documents import document, fleet, prices, service, step, urn

FN = "aws:lambda/function:Function"


def test_fleet_is_priced_by_count_and_catalog_price_with_its_root_volumes():
    cost = estimate(document(*fleet("p5.48xlarge", 3, volume_gib=500)))
    compute, volumes = (next(line for line in cost.lines if line.group == g) for g in ("compute", "storage"))
    assert compute.high == compute.low == pytest.approx(3 * prices()["p5.48xlarge"])
    assert volumes.high == pytest.approx(3 * 500 * service("ebs.gp3.storage") / 730)
    assert cost.hourly_high == pytest.approx(compute.high + volumes.high) and cost.complete


def test_no_public_price_is_unknown_never_a_guess():
    cost = estimate(document(*fleet("p5e.48xlarge", 2)))
    line = next(line for line in cost.lines if line.group == "compute")
    assert line.basis == "unknown" and "p5e.48xlarge (no public price)" in line.what
    assert not cost.complete and "lower bounds" in " ".join(cost.notes)


def test_capacity_block_is_unknown_and_shows_the_on_demand_reference():
    line = next(
        line
        for line in estimate(document(*fleet("p5.48xlarge", 2, market="capacity-block"))).lines
        if line.group == "compute"
    )
    assert line.basis == "unknown" and "Capacity Block" in line.what
    assert f"${2 * prices()['p5.48xlarge']:.2f}/h" in line.what


def test_node_group_bounds_give_min_and_max_and_spot_is_capped_at_on_demand():
    lt = step(
        "aws:ec2/launchTemplate:LaunchTemplate",
        "lt",
        {"blockDeviceMappings": [{"ebs": {"volumeSize": 100, "volumeType": "gp3"}}]},
        role="serving",
    )
    group = step(
        "aws:eks/nodeGroup:NodeGroup",
        "pool",
        {
            "instanceTypes": ["g5.xlarge", "g5.2xlarge"],
            "capacityType": "SPOT",
            "scalingConfig": {"minSize": 2, "maxSize": 5, "desiredSize": 2},
        },
        deps={"launchTemplate": [urn("aws:ec2/launchTemplate:LaunchTemplate", "lt")]},
        role="serving",
    )
    cost = estimate(document(lt, group))
    compute = next(line for line in cost.lines if line.group == "compute")
    assert compute.low == pytest.approx(2 * prices()["g5.xlarge"])
    assert compute.high == pytest.approx(5 * prices()["g5.2xlarge"])
    assert "spot" in compute.what and cost.kind == "serving"
    volumes = next(line for line in cost.lines if line.group == "storage")
    assert (volumes.low, volumes.high) == pytest.approx((2 * 100 * 0.08 / 730, 5 * 100 * 0.08 / 730))


def test_types_missing_from_the_catalog_are_named():
    group = step(
        "aws:eks/nodeGroup:NodeGroup",
        "system",
        {"instanceTypes": ["m7i.large"], "scalingConfig": {"minSize": 1, "maxSize": 2}},
        role="serving",
    )
    line = estimate(document(group)).lines[0]
    assert line.basis == "unknown" and "m7i.large (not in the instance catalog)" in line.what


@pytest.mark.parametrize(
    "deployment, per_unit, key",
    [
        ("SCRATCH_2", None, "fsx.lustre.SCRATCH_2"),
        ("PERSISTENT_2", 250, "fsx.lustre.PERSISTENT_2.250"),
        ("PERSISTENT_2", 1000, "fsx.lustre.PERSISTENT_2.1000"),
    ],
)
def test_lustre_by_deployment_type_capacity_and_throughput(deployment, per_unit, key):
    inputs = {"deploymentType": deployment, "storageCapacity": 4800}
    if per_unit:
        inputs["perUnitStorageThroughput"] = per_unit
    line = estimate(document(step("aws:fsx/lustreFileSystem:LustreFileSystem", "fs", inputs))).lines[0]
    assert line.high == pytest.approx(4800 * service(key) / 730) and line.group == "storage"


def test_lustre_without_a_sourced_price_is_unknown():
    fs = step(
        "aws:fsx/lustreFileSystem:LustreFileSystem",
        "fs",
        {"deploymentType": "PERSISTENT_1", "storageCapacity": 1200, "perUnitStorageThroughput": 100},
    )
    line = estimate(document(fs)).lines[0]
    assert line.basis == "unknown" and "no sourced price" in line.what


def test_network_nat_address_and_interface_endpoints_per_az():
    cost = estimate(
        document(
            step("aws:ec2/natGateway:NatGateway", "nat"),
            step("aws:ec2/eip:Eip", "ip"),
            step(
                "aws:ec2/vpcEndpoint:VpcEndpoint",
                "ssm",
                {"vpcEndpointType": "Interface", "subnetIds": ["a", "b"], "serviceName": "com.amazonaws.us-east-1.ssm"},
            ),
            step("aws:ec2/vpcEndpoint:VpcEndpoint", "s3", {"vpcEndpointType": "Gateway"}),
        )
    )
    expected = service("vpc.natGateway.hour") + service("vpc.publicIpv4") + 2 * service("vpc.interfaceEndpoint.hour")
    assert cost.hourly_high == pytest.approx(expected)
    assert cost.by_group() == {"network": pytest.approx((expected, expected))}
    nat = next(line for line in cost.lines if line.resource == "nat")
    assert "$0.045 per GB processed" in nat.unit_prices  # data processing is usage
    assert cost.no_charge == (
        ("aws:ec2/vpcEndpoint:VpcEndpoint", 1, "gateway endpoints (S3, DynamoDB) carry no charge"),
    )


def test_guard_is_per_run_and_adds_nothing_per_hour():
    function = step(FN, "guard", {"memorySize": 256, "timeout": 900, "runtime": "python3.12"})
    target = step("aws:cloudwatch/eventTarget:EventTarget", "on-marker", deps={"arn": [urn(FN, "guard")]})
    schedule = step(
        "aws:scheduler/schedule:Schedule",
        "at-expiry",
        {"scheduleExpression": "at(2026-01-02T00:00:00)"},
        deps={"target": [urn(FN, "guard")]},
    )
    rule = step("aws:cloudwatch/eventRule:EventRule", "markers")
    logs = step("aws:cloudwatch/logGroup:LogGroup", "guard-logs", {"retentionInDays": 14})
    cost = estimate(document(*fleet("p4d.24xlarge", 1), function, target, schedule, rule, logs))
    lambda_line = next(line for line in cost.lines if line.type == FN)
    fired = 2 * (1 + limits.GUARD_RETRY_ATTEMPTS)
    invocations = fired + math.ceil(limits.EXPORT_WAIT_SECONDS / limits.EXPORT_POLL_SECONDS)
    gb_seconds = 0.25 * (fired * 900 + limits.EXPORT_WAIT_SECONDS)
    assert lambda_line.basis == "per-run" and lambda_line.high == 0
    assert lambda_line.per_run == pytest.approx(
        invocations * service("lambda.request") + gb_seconds * service("lambda.duration.x86_64")
    )
    sched = next(line for line in cost.lines if line.type == "aws:scheduler/schedule:Schedule")
    assert sched.basis == "per-run" and sched.per_run == pytest.approx(service("scheduler.invocation"))
    assert cost.by_group()["guard"] == (0.0, 0.0)
    assert cost.run.per_run_usd == pytest.approx(lambda_line.per_run + sched.per_run)
    assert next(line for line in cost.lines if line.type.endswith("LogGroup")).basis == "usage"
    assert (
        "aws:cloudwatch/eventRule:EventRule",
        1,
        no_charge_reason("aws:cloudwatch/eventRule:EventRule"),
    ) in cost.no_charge


def test_lambda_outside_a_training_stack_is_usage():
    line = estimate(document(step(FN, "fn", role="serving"))).lines[0]
    assert line.basis == "usage" and "$0.2 per 1M requests" in line.unit_prices


def test_a_type_without_a_price_is_reported_not_dropped():
    line = estimate(document(step("aws:sns/topic:Topic", "alerts"))).lines[0]
    assert line.basis == "unknown" and "aws_service_prices.json" in line.what


def test_idle_tail_terms_come_from_the_lifecycle_limits():
    cost = estimate(document(*fleet("p4d.24xlarge", 4), step("aws:ec2/natGateway:NatGateway", "nat")), hours=10)
    node = prices()["p4d.24xlarge"] + 200 * service("ebs.gp3.storage") / 730
    nat = service("vpc.natGateway.hour")
    terms = cost.run.idle.terms
    assert [t.seconds for t in terms] == [
        limits.COMPLETION_TO_TERMINATE_SECONDS,
        limits.EXPORT_WAIT_SECONDS,
        limits.EXPORT_WAIT_SECONDS + limits.COMPLETION_TO_TERMINATE_SECONDS,
    ]
    assert [t.usd for t in terms] == pytest.approx(
        [
            4 * node * limits.COMPLETION_TO_TERMINATE_SECONDS / 3600,
            node * limits.EXPORT_WAIT_SECONDS / 3600,
            nat * (limits.EXPORT_WAIT_SECONDS + limits.COMPLETION_TO_TERMINATE_SECONDS) / 3600,
        ]
    )
    assert cost.run.idle.hard_cap_overrun_usd == pytest.approx(4 * node * limits.HARD_CAP_OVERRUN_SECONDS / 3600)
    assert cost.run.idle.unattended_usd == pytest.approx(nat * (24 - 10))  # default ttlHours 24
    assert cost.run.usd == pytest.approx(10 * (4 * node + nat) + cost.run.idle.usd)


def test_nodes_kept_for_inspection_bill_until_expiry():
    class Lifecycle:
        ttl_hours, teardown_on_completion, export_checkpoints = 48.0, False, False

    class Config:
        kind = "training"

        class training:
            lifecycle = Lifecycle

    cost = estimate(document(*fleet("p4d.24xlarge", 2)), Config, hours=8)
    kept = cost.run.idle.terms[0]
    assert kept.seconds == (48 - 8) * 3600 + limits.HARD_CAP_OVERRUN_SECONDS
    assert "teardownOnCompletion: false" in kept.what
    assert len(cost.run.idle.terms) == 2  # no export wait without exported checkpoints


def test_stack_in_another_region_is_flagged():
    cost = estimate(document(step("aws:ec2/eip:Eip", "ip"), region="us-east-2"))
    assert any("us-east-1 list prices; this stack is in us-east-2" in n for n in cost.notes)


def test_every_service_price_has_a_source_and_date_and_formats_like_aws():
    assert service_price("kms.request").per_unit() == "$0.03 per 10,000 requests"
    assert service_price("lambda.request").per_unit() == "$0.2 per 1M requests"
    assert service_price("fsx.lustre.PERSISTENT_1.100").per_unit() == "unknown per GB-month"
    assert no_charge_reason("kubernetes:apps/v1:Deployment") and no_charge_reason("aws:sns/topic:Topic") is None


def test_monthly_items_are_spread_over_730_hours():
    cost = estimate(
        document(
            step("aws:kms/key:Key", "key"),
            step("aws:cloudwatch/metricAlarm:MetricAlarm", "alarm"),
            step("aws:eks/cluster:Cluster", "eks", {"version": "1.33"}),
        )
    )
    assert cost.hourly_high == pytest.approx(
        (service("kms.key") + service("cloudwatch.alarm")) / 730 + service("eks.cluster")
    )
