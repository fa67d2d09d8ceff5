"""The training plan: every decision of the stack, made from config and catalog without pulumi."""

from datetime import UTC, datetime

import pytest

from infra.catalog.aws import instance_type
from infra.catalog.roles import types_for
from infra.core.errors import InputError
from infra.core.tags import EXPIRES_AT, RUN_ID
from infra.training.aws.config import TrainingSpec
from infra.training.aws.images import image_for
from infra.training.aws.network import cidr_problem, subnet_cidrs
from infra.training.aws.plan import plan_training

NOW = datetime(2026, 11, 21, 9, 30, 15, tzinfo=UTC)
TRAINING_TYPES = types_for("training")


def plan(region="us-east-1", dry_run=True, **fields):
    spec = TrainingSpec.model_validate({"runId": "r1", "instanceType": "p4d.24xlarge", "nodeCount": 4, **fields})
    return plan_training(spec, region, "stack-x", now=NOW, dry_run=dry_run)


def region_for(name: str) -> str:
    return "us-east-1" if instance_type(name).azs("us-east-1") else "us-east-2"


def test_the_eight_training_types_are_the_role_table():
    assert set(TRAINING_TYPES) == {
        "p4d.24xlarge",
        "p4de.24xlarge",
        "p5.48xlarge",
        "p5e.48xlarge",
        "p5en.48xlarge",
        "trn1.32xlarge",
        "trn1n.32xlarge",
        "trn2.48xlarge",
    }


@pytest.mark.parametrize("name", TRAINING_TYPES)
def test_every_training_type_gets_its_whole_fabric_with_one_ip(name):
    p = plan(region=region_for(name), instanceType=name)
    itype = instance_type(name)
    assert p.fabric_share == 1.0
    assert p.efa_devices == len(itype.network_cards)
    assert p.ip_interfaces == 1 == sum(i.carries_ip for i in p.layout)
    assert {i.network_card_index for i in p.layout if i.is_efa} == {c.index for c in itype.network_cards}
    assert p.availability_zone in itype.azs(p.region)


@pytest.mark.parametrize(
    "name, image, workers",
    [
        ("p5.48xlarge", image_for("gpu"), 8),
        ("trn1.32xlarge", image_for("neuron"), 32),
        ("trn2.48xlarge", image_for("neuron"), 64),
    ],
)
def test_image_and_workers_follow_the_accelerators(name, image, workers):
    p = plan(region=region_for(name), instanceType=name)
    assert p.image == image and p.torchrun == image.torchrun
    assert p.processes_per_node == workers


def test_own_torchrun_path_wins():
    assert plan(job={"torchrunPath": "/opt/venv/bin/torchrun"}).torchrun == "/opt/venv/bin/torchrun"


def test_on_demand_packs_nodes_in_a_cluster_placement_group():
    p = plan()
    assert (p.placement_strategy, p.market_type, p.fleet_capacity_type) == ("cluster", None, "on-demand")


def test_capacity_block_has_its_market_type_and_no_placement_group():
    az = instance_type("p5.48xlarge").azs("us-east-1")[1]
    p = plan(
        instanceType="p5.48xlarge",
        availabilityZone=az,
        capacity={"mode": "capacity-block", "reservationId": "cr-0123456789abcdef0", "reservedCount": 4},
    )
    assert (p.placement_strategy, p.market_type, p.fleet_capacity_type) == (None, "capacity-block", "capacity-block")
    assert p.reservation_id == "cr-0123456789abcdef0" and p.availability_zone == az


def test_odcr_targets_the_reservation_without_a_placement_group_of_its_own():
    az = instance_type("p4d.24xlarge").azs("us-east-1")[0]
    p = plan(availabilityZone=az, capacity={"mode": "odcr", "reservationId": "cr-0123456789abcdef0"})
    assert (p.placement_strategy, p.market_type, p.fleet_capacity_type) == (None, None, "on-demand")


def test_preview_without_a_fixed_expiry_shows_a_provisional_one():
    p = plan(lifecycle={"ttlHours": 6})
    # now + 6 h, rounded down to the minute: never later than ttlHours allows (the lifetime policy's bound)
    assert (p.expires_at, p.expires_at_provisional) == ("2026-11-21T15:30:00Z", True)
    assert p.tags[EXPIRES_AT] == "2026-11-21T15:30:00Z" and p.tags[RUN_ID] == "r1"


def test_a_fixed_expiry_is_kept_as_is():
    p = plan(dry_run=False, lifecycle={"expiresAt": "2026-11-22T08:00:00Z"})
    assert (p.expires_at, p.expires_at_provisional) == ("2026-11-22T08:00:00Z", False)


def test_up_refuses_to_invent_an_expiry():
    with pytest.raises(InputError) as error:
        plan(dry_run=False)
    assert str(error.value.problems[0]).startswith(
        "mlinfra:training.lifecycle.expiresAt: required for `pulumi up`, so the run's expiry is fixed once: "
        "start it with `python -m infra run`, or `pulumi config set --path "
        "mlinfra:training.lifecycle.expiresAt 2026-11-22T09:30:00Z`"
    )


def test_up_refuses_an_expiry_that_has_passed_but_a_preview_shows_it():
    with pytest.raises(InputError) as error:
        plan(dry_run=False, lifecycle={"expiresAt": "2026-11-21T09:30:00Z"})
    assert [str(p) for p in error.value.problems] == [
        "mlinfra:training.lifecycle.expiresAt: 2026-11-21T09:30:00Z has passed: this run's lifetime is over; tear it "
        "down (`python -m infra teardown --stack <stack>`), or start a new run with a new runId and no expiresAt"
    ]
    assert plan(lifecycle={"expiresAt": "2026-11-21T09:30:00Z"}).expires_at == "2026-11-21T09:30:00Z"


def test_the_job_is_asked_to_stop_a_grace_period_before_expiry():
    p = plan(dry_run=False, lifecycle={"expiresAt": "2026-11-22T08:00:00Z", "gracePeriodMinutes": 20})
    assert p.stop_at_epoch == int(datetime(2026, 11, 22, 7, 40, tzinfo=UTC).timestamp())
    assert (p.lifecycle.teardown_on_completion, p.lifecycle.export_checkpoints) == (True, True)  # the defaults


def test_an_impossible_expiry_date_is_refused():
    with pytest.raises(InputError) as error:
        plan(lifecycle={"expiresAt": "2026-02-30T08:00:00Z"})
    assert [str(p) for p in error.value.problems] == [
        "mlinfra:training.lifecycle.expiresAt: '2026-02-30T08:00:00Z' is not a real UTC time (YYYY-MM-DDTHH:MM:SSZ)"
    ]


def test_findings_stop_the_plan():
    with pytest.raises(InputError) as error:
        plan(instanceType="g5.xlarge")
    assert str(error.value.problems[0]).startswith("mlinfra:training.instanceType: g5.xlarge is a serving type")


def test_pinned_lustre_values_are_used_and_explained():
    p = plan(lustre={"storageCapacityGib": 4800, "perUnitStorageThroughput": 250})
    assert (p.lustre.deployment_type, p.lustre.storage_capacity_gib, p.lustre.per_unit_storage_throughput) == (
        "PERSISTENT_2",
        4800,
        250,
    )
    assert p.lustre.reasons[0] == "deployment PERSISTENT_2 250 MB/s/TiB: pinned by perUnitStorageThroughput"


def test_run_prefixes():
    assert plan().prefixes == {"datasets": "datasets/", "checkpoints": "checkpoints/r1/", "runs": "runs/r1/"}


def test_network_layout():
    assert subnet_cidrs("10.64.0.0/16") == ("10.64.0.0/18", "10.64.255.240/28")
    assert subnet_cidrs("10.0.8.0/22") == ("10.0.8.0/24", "10.0.11.240/28")
    assert cidr_problem("10.64.0.0/16") is None
    assert (
        cidr_problem("10.0.0.0/8")
        == "prefix /8 is out of range: use /16 to /22 (a node takes one IP; the file system a few)"
    )
    assert cidr_problem("52.0.0.0/16") == "52.0.0.0/16 is not a private range (RFC 1918), e.g. 10.64.0.0/16"
