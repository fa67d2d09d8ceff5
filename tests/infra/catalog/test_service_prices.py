"""The service price table: every entry sourced and dated, no invented figures, one source of truth with
the Lustre sizing's prices, and every resource type of the demo stacks priced or listed as free."""

from __future__ import annotations

import json
import re

import pytest

from infra.catalog.services import lustre_price_key, no_charge_reason, service_price, service_price_keys
from tests.infra.tools.cost.cost_documents import DATA

RAW = json.loads((DATA / "aws_service_prices.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("key", sorted(RAW["prices"]))
def test_entry_is_sourced_dated_and_not_negative(key):
    entry = RAW["prices"][key]
    assert set(entry) == {"usd", "unit", "source", "asOf"}
    assert entry["source"].strip() and re.fullmatch(r"\d{4}-\d{2}", entry["asOf"])
    assert entry["usd"] is None or entry["usd"] >= 0
    assert service_price(key).usd == entry["usd"]


def test_unknown_prices_say_why():
    for key, entry in RAW["prices"].items():
        if entry["usd"] is None:
            assert "no sourced price" in entry["source"], key


def test_reference_figures():
    """docs/reference.md: scratch 0.140; persistent 125: 0.145, 250: 0.21, 500: 0.34, 1000: 0.60; EKS $0.10/h."""
    assert [service_price(lustre_price_key("PERSISTENT_2", t)).usd for t in (125, 250, 500, 1000)] == [
        0.145,
        0.21,
        0.34,
        0.6,
    ]
    assert service_price("fsx.lustre.SCRATCH_2").usd == 0.14 and service_price("eks.cluster").usd == 0.10


def test_unknown_key_names_the_known_ones():
    with pytest.raises(KeyError, match="known: cloudwatch.alarm, dataTransfer.internetOut, ebs.gp3.storage"):
        service_price("nat")
    assert "vpc.natGateway.hour" in service_price_keys()


@pytest.mark.parametrize(
    "pattern, example",
    [("kubernetes:*", "kubernetes:core/v1:Service"), ("pulumi:providers:*", "pulumi:providers:kubernetes")],
)
def test_no_charge_patterns(pattern, example):
    assert no_charge_reason(example) == RAW["noCharge"][pattern]
