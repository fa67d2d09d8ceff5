"""EFA layout: every EFA-capable card gets an EFA interface, one IP per node, clear errors otherwise."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.catalog.aws import instance_type, known_instance_types
from infra.training.aws.efa import (
    EfaUnsupported,
    Interface,
    attached_bandwidth_gbps,
    bandwidth_fraction,
    efa_device_count,
    efa_layout,
)

# The eight training types and their EFA-capable card counts (docs/reference.md training table).
TRAINING = [
    ("p4d.24xlarge", 4),
    ("p4de.24xlarge", 4),
    ("p5.48xlarge", 32),
    ("p5e.48xlarge", 32),
    ("p5en.48xlarge", 16),
    ("trn1.32xlarge", 8),
    ("trn1n.32xlarge", 16),
    ("trn2.48xlarge", 16),
]
EFA_TYPES = [n for n in known_instance_types() if instance_type(n).efa_supported]


def assert_valid_layout(name: str) -> None:
    t = instance_type(name)
    layout = efa_layout(t)
    pairs = [(i.network_card_index, i.device_index) for i in layout]
    assert len(pairs) == len(set(pairs)), f"{name}: duplicate (card, device) pairs {pairs}"
    assert [i for i in layout if i.carries_ip] == [Interface(0, 0, "interface", True)]
    efa_cards = {i.network_card_index for i in layout if i.is_efa}
    assert efa_cards == {c.index for c in t.efa_cards[: t.max_efa_interfaces]}
    assert efa_device_count(layout) == min(t.max_efa_interfaces, len(t.efa_cards))
    card_limits = {c.index: c.max_interfaces for c in t.network_cards}
    for card in {i.network_card_index for i in layout}:
        used = sum(1 for i in layout if i.network_card_index == card)
        assert used <= card_limits[card], f"{name}: card {card} holds {used} > {card_limits[card]}"
    for i in layout:
        card = next(c for c in t.network_cards if c.index == i.network_card_index)
        assert i.interface_type in card.interface_types


@pytest.mark.parametrize(("name", "cards"), TRAINING)
def test_training_types_attach_the_whole_fabric(name, cards):
    t = instance_type(name)
    layout = efa_layout(t)
    assert bandwidth_fraction(t, layout) == 1.0
    assert attached_bandwidth_gbps(t, layout) == t.total_bandwidth_gbps
    assert sum(1 for i in layout if i.carries_ip) == 1
    assert efa_device_count(layout) == cards == len(t.network_cards)
    assert_valid_layout(name)


def test_p4d_layout_is_the_documented_one():
    assert efa_layout(instance_type("p4d.24xlarge")) == (
        Interface(0, 0, "interface", True),
        Interface(0, 1, "efa-only", False),
        Interface(1, 0, "efa-only", False),
        Interface(2, 0, "efa-only", False),
        Interface(3, 0, "efa-only", False),
    )


def test_card_without_efa_gets_nothing():
    # p6-b300.48xlarge: card 0 is an ENA-only card; the 16 others carry EFA.
    t = instance_type("p6-b300.48xlarge")
    assert not t.network_cards[0].efa_capable
    layout = efa_layout(t)
    assert layout[0] == Interface(0, 0, "interface", True)
    assert all(i.network_card_index != 0 for i in layout[1:])
    assert efa_device_count(layout) == 16
    assert attached_bandwidth_gbps(t, layout) == sum(c.baseline_gbps for c in t.efa_cards)
    assert bandwidth_fraction(t, layout) < 1.0


def test_layout_without_efa_attaches_nothing():
    t = instance_type("p5.48xlarge")
    primary_only = (Interface(0, 0, "interface", True),)
    assert efa_device_count(primary_only) == 0
    assert attached_bandwidth_gbps(t, primary_only) == 0
    assert bandwidth_fraction(t, primary_only) == 0.0


def test_card0_only_layout_gets_a_fraction():
    t = instance_type("p4d.24xlarge")
    card0_only = efa_layout(t)[:2]
    assert bandwidth_fraction(t, card0_only) == 0.25


def test_g5_xlarge_has_no_efa():
    with pytest.raises(EfaUnsupported) as err:
        efa_layout(instance_type("g5.xlarge"))
    assert str(err.value) == (
        "g5.xlarge does not support EFA (Elastic Fabric Adapter), which multi-node training needs on "
        "every network card; choose an EFA-capable instance type, e.g. g5.8xlarge, g5.12xlarge, "
        "g5.16xlarge, g5.24xlarge, g5.48xlarge"
    )
    assert isinstance(err.value, ValueError)
    assert err.value.instance_type == "g5.xlarge"


def test_inf2_xlarge_has_no_efa():
    with pytest.raises(EfaUnsupported) as err:
        efa_layout(instance_type("inf2.xlarge"))
    # No Inferentia2 type has EFA, so the suggestions fall back to other Neuron types.
    assert str(err.value) == (
        "inf2.xlarge does not support EFA (Elastic Fabric Adapter), which multi-node training needs on "
        "every network card; choose an EFA-capable instance type, e.g. trn2.3xlarge, trn1.32xlarge, "
        "trn1n.32xlarge, trn2.48xlarge"
    )


@given(st.sampled_from(EFA_TYPES))
def test_every_efa_type_gets_a_valid_layout(name):
    assert_valid_layout(name)


def test_every_type_without_efa_is_refused():
    for name in known_instance_types():
        if not instance_type(name).efa_supported:
            with pytest.raises(EfaUnsupported, match=f"^{name} does not support EFA"):
                efa_layout(instance_type(name))
