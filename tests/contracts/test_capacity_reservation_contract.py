"""How an `odcr` run reaches its reservation, against the EC2 and Resource Groups API models of the
pinned botocore and the facts kept in data/ec2_capacity_reservations.json (source and date there)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import botocore

from infra.training.aws.reservation import POOL_CONFIGURATION, capacity_reservation_arn

FACTS = json.loads((Path(__file__).parent / "data" / "ec2_capacity_reservations.json").read_text(encoding="utf-8"))
MODELS = Path(botocore.__file__).parent / "data"


def shapes(service: str, version: str) -> dict[str, Any]:
    model: dict[str, Any] = json.loads(gzip.open(MODELS / service / version / "service-2.json.gz").read())
    return model["shapes"]


def test_the_launch_template_can_target_a_reservation_group():
    ec2 = shapes("ec2", "2016-11-15")
    target = FACTS["launchTemplateTarget"]
    assert list(ec2[target["shape"]]["members"]) == target["members"]
    spec = ec2["LaunchTemplateCapacityReservationSpecificationRequest"]["members"]
    assert spec["CapacityReservationTarget"]["shape"] == target["shape"]


def test_the_fleet_uses_reservations_first_only_in_the_strategy_the_model_knows():
    ec2 = shapes("ec2", "2016-11-15")
    options = FACTS["fleetOnDemandOptions"]
    member = ec2[options["shape"]]["members"][options["member"]]
    strategy = ec2[member["shape"]]["members"]["UsageStrategy"]["shape"]
    assert ec2[strategy]["enum"] == options["usageStrategies"]


def test_the_groups_configuration_is_the_documented_one_and_fits_the_model():
    documented = [
        (entry["type"], {key: tuple(values) for key, values in entry.get("parameters", {}).items()})
        for entry in FACTS["reservationGroupConfiguration"]
    ]
    assert list(POOL_CONFIGURATION) == documented
    groups = shapes("resource-groups", "2017-11-27")
    kind, name = groups["GroupConfigurationType"], groups["GroupConfigurationParameterName"]
    for config_type, parameters in POOL_CONFIGURATION:
        assert len(config_type) <= kind["max"] and config_type.startswith("AWS::")
        assert all(len(key) <= name["max"] and set(key) <= set("abcdefghijklmnopqrstuvwxyz-") for key in parameters)


def test_the_reservation_arn_is_ec2s():
    assert capacity_reservation_arn("aws", "us-east-1", "123456789012", "cr-0123456789abcdef0") == (
        "arn:aws:ec2:us-east-1:123456789012:capacity-reservation/cr-0123456789abcdef0"
    )
