"""Training config: shape (pydantic) and meaning (findings naming the field and the fix)."""

import pytest
from pydantic import ValidationError

from infra.catalog.aws import instance_type
from infra.catalog.roles import types_for
from infra.training.aws.checks import chosen_az, training_findings
from infra.training.aws.config import TrainingSpec

BASE = {"runId": "llama-7b-r1", "instanceType": "p4d.24xlarge", "nodeCount": 4}


def spec(**changes) -> TrainingSpec:
    values = {**BASE}
    for key, value in changes.items():
        values[key] = value
    return TrainingSpec.model_validate(values)


def findings(region="us-east-1", **changes) -> list[str]:
    return [str(p) for p in training_findings(spec(**changes), region)]


def test_happy_config_has_no_findings_and_picks_an_offering_az():
    assert findings() == []
    az = chosen_az(spec(), "us-east-1")
    assert az in instance_type("p4d.24xlarge").azs("us-east-1")


def test_every_role_type_is_in_the_catalog():
    for role in ("training", "serving"):
        for name in types_for(role):
            instance_type(name)


def test_serving_type_for_training_is_refused():
    assert findings(instanceType="g5.xlarge") == [
        "mlinfra:training.instanceType: g5.xlarge is a serving type; training takes one of: p4d.24xlarge, "
        "p4de.24xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge, trn1.32xlarge, trn1n.32xlarge, trn2.48xlarge"
    ]


def test_unknown_type_lists_close_names():
    assert findings(instanceType="p4d.24xlarg") == [
        "mlinfra:training.instanceType: unknown instance type 'p4d.24xlarg'; closest known: p4d.24xlarge, p4de.24xlarge"
    ]


def test_az_that_does_not_offer_the_type():
    offered = ", ".join(instance_type("trn1n.32xlarge").azs("us-east-1"))
    assert findings(instanceType="trn1n.32xlarge", availabilityZone="us-east-1a") == [
        f"mlinfra:training.availabilityZone: us-east-1a does not offer trn1n.32xlarge; AZs that do: {offered}"
    ]


def test_region_that_does_not_offer_the_type_names_the_ones_that_do():
    [line] = findings(region="af-south-1")
    assert line.startswith(
        "mlinfra:training.instanceType: p4d.24xlarge is not offered in af-south-1; regions that offer it: "
    )


def test_capacity_block_needs_a_reservation_and_its_az():
    assert findings(capacity={"mode": "capacity-block"}) == [
        "mlinfra:training.capacity.reservationId: required when capacity.mode is capacity-block: the "
        "reservation id (cr-...)",
        "mlinfra:training.availabilityZone: required with a capacity block: the AZ of the reservation (nodes "
        "must launch there)",
    ]


def test_node_count_within_the_reservation():
    az = instance_type("p4d.24xlarge").azs("us-east-1")[0]
    assert findings(
        capacity={"mode": "odcr", "reservationId": "cr-0123456789abcdef0", "reservedCount": 2}, availabilityZone=az
    ) == ["mlinfra:training.nodeCount: 4 exceeds the reservation's 2 instances; use at most 2"]


def test_lustre_throughput_300_is_not_an_allowed_value():
    assert findings(lustre={"perUnitStorageThroughput": 300}) == [
        "mlinfra:training.lustre.perUnitStorageThroughput: 300 is not a PERSISTENT_2 throughput; "
        "allowed: 125, 250, 500, 1000 MB/s/TiB"
    ]


def test_dataset_larger_than_the_file_system():
    assert findings(lustre={"datasetGib": 5000, "storageCapacityGib": 2400}) == [
        "mlinfra:training.lustre.storageCapacityGib: 2400 GiB cannot hold the 5000 GiB dataset; raise it or "
        "drop the override"
    ]


@pytest.mark.parametrize("field, value", [("nodeCount", 0), ("nodeCount", 257), ("runId", "Bad_Id")])
def test_shape_errors(field, value):
    with pytest.raises(ValidationError):
        spec(**{field: value})


def test_command_is_the_script_not_an_interpreter():
    assert findings(job={"command": ["python", "train.py"]}) == [
        "mlinfra:training.job.command: starts with 'python', but torchrun runs the command as a Python script: "
        'give the script and its arguments, e.g. ["/opt/job/train.py", "--epochs", "3"]'
    ]


def test_own_subnet_needs_its_az():
    assert findings(network={"vpcId": "vpc-0123456789abcdef0", "subnetId": "subnet-0123456789abcdef0"}) == [
        "mlinfra:training.availabilityZone: required with your own subnet: the subnet's AZ (nodes and file "
        "system launch there)"
    ]
