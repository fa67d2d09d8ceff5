"""The instance catalog: facts match the field reference, lookups fail helpfully, data is fresh."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from importlib.resources import files

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.catalog.aws import (
    UnknownInstanceType,
    instance_table_source,
    instance_type,
    known_instance_types,
    on_demand_price,
    price_table_source,
)
from infra.catalog.refresh_zones import GENERAL_PURPOSE
from infra.catalog.roles import types_for
from tests.helpers import ROOT

# docs/reference.md training table: accelerators, network cards, max EFA, Gbps per card.
TRAINING = [
    ("p4d.24xlarge", 8, "A100", 4, 4, 100),
    ("p4de.24xlarge", 8, "A100", 4, 4, 100),
    ("p5.48xlarge", 8, "H100", 32, 32, 100),
    ("p5e.48xlarge", 8, "H200", 32, 32, 100),
    ("p5en.48xlarge", 8, "H200", 16, 16, 200),
    ("trn1.32xlarge", 16, "Trainium", 8, 8, 100),
    ("trn1n.32xlarge", 16, "Trainium", 16, 16, 100),
    ("trn2.48xlarge", 16, "Trainium2", 16, 16, 200),
]
# docs/reference.md serving line: accelerator count and model.
SERVING = [
    ("inf2.xlarge", 1, "Inferentia2"),
    ("inf2.8xlarge", 1, "Inferentia2"),
    ("inf2.24xlarge", 6, "Inferentia2"),
    ("inf2.48xlarge", 12, "Inferentia2"),
    ("g5.xlarge", 1, "A10G"),
    ("g5.2xlarge", 1, "A10G"),
    ("g5.12xlarge", 4, "A10G"),
    ("g5.48xlarge", 8, "A10G"),
    ("g6.xlarge", 1, "L4"),
    ("g6e.xlarge", 1, "L40S"),
]
REFERENCE_TYPES = [row[0] for row in TRAINING + SERVING]


@pytest.mark.parametrize(("name", "count", "model", "cards", "max_efa", "gbps"), TRAINING)
def test_training_types_match_the_reference(name, count, model, cards, max_efa, gbps):
    t = instance_type(name)
    assert (t.accelerator_count, t.accelerator_model) == (count, model)
    assert len(t.network_cards) == t.max_network_cards == cards
    assert t.max_efa_interfaces == max_efa and t.efa_supported
    assert {c.baseline_gbps for c in t.network_cards} == {gbps}
    assert all(c.efa_capable for c in t.network_cards)
    assert t.total_bandwidth_gbps == cards * gbps
    assert "cluster" in t.placement_strategies


@pytest.mark.parametrize(("name", "count", "model"), SERVING)
def test_serving_types_match_the_reference(name, count, model):
    t = instance_type(name)
    assert (t.accelerator_count, t.accelerator_model) == (count, model)


@pytest.mark.parametrize("name", REFERENCE_TYPES)
def test_accelerator_kind_is_data_not_name(name):
    t = instance_type(name)
    neuron = t.accelerator_model in {"Trainium", "Trainium2", "Inferentia2"}
    assert t.accelerator_kind == ("neuron" if neuron else "gpu")


def test_trn2_chip_memory_is_corrected_to_96_gib():
    (chip,) = instance_type("trn2.48xlarge").accelerators
    assert (chip.kind, chip.count, chip.memory_mib) == ("neuron", 16, 96 * 1024)
    raw = json.loads((files("infra.catalog") / "data" / "aws_instances.json").read_text(encoding="utf-8"))
    (correction,) = [c for c in raw["corrections"] if "trn2.48xlarge" in c["instanceTypes"]]
    assert correction["snapshotValue"] == 512 * 1024 and correction["value"] == 96 * 1024
    assert correction["reason"]


@pytest.mark.parametrize("name", ["inf2.xlarge", "inf2.8xlarge", "inf2.24xlarge", "inf2.48xlarge", "g5.xlarge"])
def test_no_efa_on_inf2_or_small_g5(name):
    t = instance_type(name)
    assert not t.efa_supported and t.max_efa_interfaces == 0 and t.efa_cards == ()


@pytest.mark.parametrize("name", ["p4d.24xlarge", "p5.48xlarge"])
def test_us_east_1_offers_the_big_training_types(name):
    azs = instance_type(name).azs("us-east-1")
    assert azs and all(az.startswith("us-east-1") for az in azs) and list(azs) == sorted(azs)


def test_azs_of_a_region_without_offerings_is_empty():
    assert instance_type("trn1n.32xlarge").azs("af-south-1") == ()


def test_records_are_frozen():
    t = instance_type("p5.48xlarge")
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.vcpus = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        t.offerings["us-east-1"] = ()  # type: ignore[index]


def test_unknown_type_names_closest_known():
    with pytest.raises(UnknownInstanceType) as err:
        instance_type("p4d.24xlarg")
    assert str(err.value) == "unknown instance type 'p4d.24xlarg'; closest known: p4d.24xlarge, p4de.24xlarge"
    assert err.value.name == "p4d.24xlarg"
    assert err.value.suggestions == ("p4d.24xlarge", "p4de.24xlarge")


def test_unknown_type_without_close_names_lists_families():
    with pytest.raises(LookupError) as err:
        instance_type("foo")
    assert str(err.value) == (
        "unknown instance type 'foo'; known families: "
        "g4dn, g5, g6, g6e, inf2, m6i, p4d, p4de, p5, p5e, p5en, p6-b200, p6-b300, trn1, trn1n, trn2"
    )
    assert err.value.suggestions == ()


@given(st.text(max_size=30).filter(lambda s: s not in known_instance_types()))
def test_any_unknown_name_raises_unknown_instance_type(name):
    with pytest.raises(UnknownInstanceType) as err:
        instance_type(name)
    assert str(err.value).startswith(f"unknown instance type {name!r}; ")
    assert set(err.value.suggestions) <= set(known_instance_types())
    with pytest.raises(UnknownInstanceType):
        on_demand_price(name)


@given(st.sampled_from(known_instance_types()))
def test_every_known_type_is_consistent(name):
    t = instance_type(name)
    assert t.name == name
    assert [c.index for c in t.network_cards] == list(range(len(t.network_cards)))
    assert t.efa_supported == (t.max_efa_interfaces > 0) == bool(t.efa_cards)
    price = on_demand_price(name)
    assert price is None or price > 0


def test_prices():
    assert on_demand_price("p4d.24xlarge") == 21.96
    assert on_demand_price("p5.48xlarge") == 55.04
    assert on_demand_price("p5e.48xlarge") is None
    assert on_demand_price("trn2.48xlarge") is None


def test_price_table_covers_the_reference_and_only_known_types():
    raw = json.loads((files("infra.catalog") / "data" / "aws_prices.json").read_text(encoding="utf-8"))
    # The reference's types, every serving type the sizer ranks (roles.json) and the serving cluster's system pool.
    assert set(raw["pricesPerHour"]) == set(REFERENCE_TYPES) | set(types_for("serving")) | set(GENERAL_PURPOSE)
    assert {h["pricePerHour"] for h in raw["history"]["p4d.24xlarge"]} == {32.77}
    assert {h["pricePerHour"] for h in raw["history"]["p5.48xlarge"]} == {98.32}


def test_sources_and_dates_are_stamped():
    source, as_of = instance_table_source()
    assert "DescribeInstanceTypes" in source and "moto" in source and as_of
    assert price_table_source() == ("instances.vantage.sh, us-east-1 on-demand", "2026-01")


def test_catalog_is_pure():
    code = (
        "import sys, infra.catalog.aws as c; c.instance_type('p5.48xlarge'); "
        "sys.exit(any(m.split('.')[0] == 'pulumi' for m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_generated_file_is_fresh():
    result = subprocess.run(
        [sys.executable, "-m", "infra.catalog.refresh", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
