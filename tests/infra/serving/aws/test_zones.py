"""Serving zones: chosen by zone ID from where each pool's types are offered and where EKS places clusters."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from infra.catalog.aws.zones import (
    eks_unsupported_zone_ids,
    general_purpose_types,
    offline_zones,
    zone_ids_offering,
)
from infra.core.errors import InputError, Problem
from infra.serving.aws import node_pools, zones
from infra.serving.aws.checks import serving_findings
from infra.serving.aws.config import ClusterSpec, ServingSpec
from infra.serving.aws.zones import SYSTEM_POOL, Zone, choose_zones, pool_zone_ids
from tests.helpers import ROOT

DEMO_POOLS = {
    SYSTEM_POOL: node_pools.SYSTEM_INSTANCE_TYPES,
    "inf2": ["inf2.xlarge", "inf2.8xlarge"],
    "g5": ["g5.xlarge", "g5.2xlarge"],
}


def account(region: str) -> list[Zone]:
    """The offline preview's account: moto's zone names and IDs."""
    return [Zone(name, zone_id) for name, zone_id in offline_zones(region).items()]


def test_the_demo_pools_get_the_lowest_zone_ids_that_offer_all_of_them():
    # us-east-1: inf2 is offered in use1-az2, az4, az5, az6 (DescribeInstanceTypeOfferings by zone ID), g5 and
    # m6i also in az1; use1-az3 is EKS's disallowed zone. Names are the offline account's: az2 is us-east-1c.
    plan = choose_zones("us-east-1", account("us-east-1"), DEMO_POOLS, 2)
    assert plan.zones == (Zone("us-east-1c", "use1-az2"), Zone("us-east-1d", "use1-az4"))
    assert dict(plan.slots) == {SYSTEM_POOL: (0, 1), "inf2": (0, 1), "g5": (0, 1)}


def test_the_choice_is_by_zone_id_whatever_the_account_calls_the_zones():
    other = [Zone(f"us-east-1{letter}", z.zone_id) for letter, z in zip("fedcba", account("us-east-1"), strict=True)]
    plan = choose_zones("us-east-1", other, DEMO_POOLS, 2)
    assert [z.zone_id for z in plan.zones] == ["use1-az2", "use1-az4"]
    assert [z.name for z in plan.zones] == ["us-east-1d", "us-east-1c"]  # this account's names for them


def test_a_pool_offered_in_only_some_zones_gets_only_those():
    # eu-west-2 (catalog): both inf2 sizes only in euw2-az2, both g5 sizes in az2 and az3.
    assert pool_zone_ids("eu-west-2", ["inf2.xlarge", "inf2.8xlarge"]) == ("euw2-az2",)
    assert pool_zone_ids("eu-west-2", ["g5.xlarge", "g5.2xlarge"]) == ("euw2-az2", "euw2-az3")
    plan = choose_zones("eu-west-2", account("eu-west-2"), DEMO_POOLS, 3)
    assert [z.zone_id for z in plan.zones] == ["euw2-az1", "euw2-az2", "euw2-az3"]
    assert dict(plan.slots) == {SYSTEM_POOL: (0, 1, 2), "inf2": (1,), "g5": (1, 2)}
    assert plan.pool_zone_ids("inf2") == ("euw2-az2",)


def test_zones_that_serve_more_pools_win_over_lower_ids():
    # sa-east-1: inf2 only in sae1-az3, g5 in sae1-az1 and az2: the two lowest IDs would leave inf2 out.
    assert pool_zone_ids("sa-east-1", DEMO_POOLS["inf2"]) == ("sae1-az3",)
    assert pool_zone_ids("sa-east-1", DEMO_POOLS["g5"]) == ("sae1-az1", "sae1-az2")
    plan = choose_zones("sa-east-1", account("sa-east-1"), DEMO_POOLS, 2)
    assert [z.zone_id for z in plan.zones] == ["sae1-az1", "sae1-az3"]
    assert dict(plan.slots) == {SYSTEM_POOL: (0, 1), "inf2": (1,), "g5": (0,)}


def test_an_unsupported_zone_is_never_picked_even_where_it_offers_the_types():
    # use1-az3 is the one zone of us-east-1 offering p5.4xlarge and p5.48xlarge besides others; EKS refuses it.
    assert "use1-az3" in zone_ids_offering("p5.48xlarge", "us-east-1")
    assert eks_unsupported_zone_ids("us-east-1") == ("use1-az3",)
    plan = choose_zones("us-east-1", account("us-east-1"), {"p5": ["p5.48xlarge"]}, 3)
    assert "use1-az3" not in {z.zone_id for z in plan.zones}
    assert "use1-az3" not in pool_zone_ids("us-east-1", ["p5.48xlarge"])


@pytest.mark.parametrize("region", ["us-east-1", "us-west-1", "ca-central-1"])
def test_no_region_ever_gets_its_disallowed_zone(region):
    everything = {SYSTEM_POOL: node_pools.SYSTEM_INSTANCE_TYPES}
    for count in (2, 3):
        try:
            plan = choose_zones(region, account(region), everything, count)
        except InputError:
            continue  # too few zones left: refused, never padded with the disallowed one
        assert not {z.zone_id for z in plan.zones} & set(eks_unsupported_zone_ids(region))


def test_too_few_supported_zones_is_refused_naming_the_count():
    two = [Zone("us-east-1c", "use1-az2"), Zone("us-east-1e", "use1-az3"), Zone("us-east-1d", "use1-az4")]
    with pytest.raises(InputError) as error:
        choose_zones("us-east-1", two, {SYSTEM_POOL: node_pools.SYSTEM_INSTANCE_TYPES}, 3)
    assert error.value.problems == [
        Problem(
            "mlinfra:serving.cluster.availabilityZones",
            "3 zones asked for, but this account has 2 zones in us-east-1 that EKS supports (use1-az2, use1-az4); "
            "EKS needs two",
        )
    ]


def test_a_pool_whose_types_share_no_zone_is_refused_naming_the_pool_and_the_types(monkeypatch):
    offered = {"inf2.xlarge": ("use1-az1", "use1-az3"), "inf2.8xlarge": ("use1-az2",)}
    monkeypatch.setattr(zones, "zone_ids_offering", lambda t, region: offered.get(t, ("use1-az1", "use1-az2")))
    with pytest.raises(InputError) as error:
        choose_zones("us-east-1", account("us-east-1"), {"inf2": ["inf2.xlarge", "inf2.8xlarge"]}, 2)
    assert [str(p) for p in error.value.problems] == [
        "mlinfra:serving.nodePools.inf2.instanceTypes: no availability zone of us-east-1 that EKS supports offers "
        "every type of the inf2 pool: inf2.xlarge in use1-az1; inf2.8xlarge in use1-az2; list sizes that share a zone"
    ]


def test_pools_that_cannot_all_fit_in_the_clusters_zones_are_named(monkeypatch):
    offered = {"inf2.xlarge": ("use1-az2",), "g5.xlarge": ("use1-az4",), "g6.xlarge": ("use1-az5",)}
    monkeypatch.setattr(zones, "zone_ids_offering", lambda t, region: offered[t])
    pools = {"inf2": ["inf2.xlarge"], "g5": ["g5.xlarge"], "g6": ["g6.xlarge"]}
    with pytest.raises(InputError) as error:
        choose_zones("us-east-1", account("us-east-1"), pools, 2)
    assert [str(p) for p in error.value.problems] == [
        "mlinfra:serving.nodePools.g6.instanceTypes: offered only in use1-az5, none of which fits in the cluster's 2 "
        "zones with the other pools'; raise cluster.availabilityZones or list other sizes"
    ]
    assert [z.zone_id for z in choose_zones("us-east-1", account("us-east-1"), pools, 3).zones] == [
        "use1-az2",
        "use1-az4",
        "use1-az5",
    ]


def test_the_meaning_checks_refuse_such_a_pool_before_anything_is_declared(monkeypatch):
    offered = {"g5.xlarge": ("use1-az1",), "g5.2xlarge": ("use1-az2",)}
    monkeypatch.setattr(zones, "zone_ids_offering", lambda t, region: offered.get(t, ("use1-az1", "use1-az2")))
    spec = ServingSpec.model_validate(
        {
            "models": [{"name": "m", "version": "1", "accelerator": "g5", "image": "public.ecr.aws/x/y:1"}],
        }
    )
    assert Problem(
        "mlinfra:serving.nodePools.g5.instanceTypes",
        "no availability zone of us-east-1 that EKS supports offers every type of the g5 pool: g5.xlarge in "
        "use1-az1; g5.2xlarge in use1-az2; list sizes that share a zone",
    ) in serving_findings(spec, "us-east-1")


def test_a_pool_is_refused_when_the_account_lacks_the_zones_that_offer_it():
    old_zones_only = [Zone("us-east-1b", "use1-az1"), Zone("us-east-1e", "use1-az3")]
    with pytest.raises(InputError) as error:
        choose_zones("us-east-1", old_zones_only, {"inf2": ["inf2.xlarge"]}, 2)
    assert [str(p) for p in error.value.problems] == [
        "mlinfra:serving.nodePools.inf2.instanceTypes: the zones of us-east-1 that offer every type of the pool "
        "(use1-az2, use1-az4, use1-az5, use1-az6) are not available to this account, which has use1-az1; list "
        "sizes offered there"
    ]


def test_zone_ids_sort_by_number():
    assert zones.zone_id_order("use1-az10") > zones.zone_id_order("use1-az2")


def test_the_zone_data_covers_the_system_pools_types():
    assert set(node_pools.SYSTEM_INSTANCE_TYPES) <= set(general_purpose_types())


def test_the_eks_zone_facts_name_their_source():
    facts = json.loads((ROOT / "infra" / "catalog" / "data" / "eks_zones.json").read_text(encoding="utf-8"))
    assert "network-reqs" in facts["source"] and facts["asOf"] and facts["checked"]
    assert facts["unsupportedZoneIds"] == {
        "ca-central-1": ["cac1-az3"],
        "us-east-1": ["use1-az3"],
        "us-west-1": ["usw1-az2"],
    }


AWS_ZONES = json.loads((ROOT / "infra/catalog/data/aws_zones.json").read_text(encoding="utf-8"))
SERVING_TYPES = sorted(
    {t for by_type in AWS_ZONES["zoneIdOfferings"].values()
     for t in by_type if t.split(".")[0] in ("inf2", "g4dn", "g5", "g6", "g6e")}
)  # fmt: skip
REGIONS = sorted(AWS_ZONES["offlineZones"])


@settings(max_examples=300, deadline=None)
@given(
    region=st.sampled_from(REGIONS),
    pools=st.dictionaries(
        st.sampled_from(["inf2", "g4dn", "g5", "g6", "g6e"]),
        st.lists(st.sampled_from(SERVING_TYPES), min_size=1, max_size=3, unique=True),
        min_size=1,
        max_size=4,
    ),
    count=st.sampled_from([2, 3]),
)
def test_every_choice_is_in_supported_zones_that_offer_each_pools_types(region, pools, count):
    try:
        plan = choose_zones(region, account(region), pools, count)
    except InputError as error:
        assert error.problems and all(p.path.startswith(("mlinfra:serving.", "aws:region")) for p in error.problems)
        return
    ids = [z.zone_id for z in plan.zones]
    assert len(ids) == len(set(ids)) == count
    assert not set(ids) & set(eks_unsupported_zone_ids(region))
    assert set(ids) <= set(offline_zones(region).values())
    for pool, types in pools.items():
        assert plan.slots[pool], pool
        for zone_id in plan.pool_zone_ids(pool):
            assert all(zone_id in zone_ids_offering(t, region) for t in types), (pool, zone_id)
        # Every chosen zone that offers all the pool's types is the pool's.
        assert set(plan.pool_zone_ids(pool)) == set(ids) & set(pool_zone_ids(region, types))


def test_pinned_zones_are_used_in_their_order():
    plan = choose_zones("us-east-1", account("us-east-1"), DEMO_POOLS, 3, pinned=["use1-az6", "use1-az2"])
    assert plan.zones == (Zone("us-east-1a", "use1-az6"), Zone("us-east-1c", "use1-az2"))
    assert dict(plan.slots) == {SYSTEM_POOL: (0, 1), "inf2": (0, 1), "g5": (0, 1)}


@pytest.mark.parametrize(
    ("pinned", "message"),
    [
        (["use1-az3", "use1-az2"], "EKS places no cluster in use1-az3 (UnsupportedAvailabilityZoneException)"),
        (
            ["usw2-az1", "use1-az2"],
            "usw2-az1: not zones of us-east-1, whose zone IDs are use1-az1, use1-az2, use1-az3, use1-az4, use1-az5, "
            "use1-az6",
        ),
        (
            ["use1-az5", "use1-az2"],
            "use1-az5: not available to this account in us-east-1, which has use1-az1, use1-az2, use1-az3, "
            "use1-az4, use1-az6",
        ),
    ],
)
def test_pinned_zones_the_account_or_eks_cannot_use_are_refused(pinned, message):
    without_az5 = [z for z in account("us-east-1") if z.zone_id != "use1-az5"]
    with pytest.raises(InputError) as error:
        choose_zones("us-east-1", without_az5, DEMO_POOLS, 2, pinned=pinned)
    assert error.value.problems == [Problem("mlinfra:serving.cluster.availabilityZoneIds", message)]


def test_pinned_zones_that_leave_a_pool_out_are_refused_naming_it():
    with pytest.raises(InputError) as error:
        choose_zones("eu-west-2", account("eu-west-2"), DEMO_POOLS, 2, pinned=["euw2-az1", "euw2-az3"])
    assert [str(p) for p in error.value.problems] == [
        "mlinfra:serving.nodePools.inf2.instanceTypes: none of cluster.availabilityZoneIds (euw2-az1, euw2-az3) "
        "offers every type of the pool; zones of eu-west-2 that do: euw2-az2"
    ]


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        (["us-east-1a", "us-east-1b"], "'us-east-1a' is not an availability zone ID"),
        (["use1-az2", "use1-az2"], "lists a zone twice"),
        (["use1-az2"], "at least 2 items"),
    ],
)
def test_pinned_zone_ids_are_checked_for_shape(ids, message):
    with pytest.raises(ValidationError) as error:
        ClusterSpec.model_validate({"availabilityZoneIds": ids})
    assert message in str(error.value)


def test_the_meaning_checks_see_pinned_zones_before_anything_is_declared():
    spec = ServingSpec.model_validate(
        {
            "cluster": {"availabilityZones": 3, "availabilityZoneIds": ["use1-az3", "use1-az1"]},
            "models": [{"name": "m", "version": "1", "accelerator": "g5", "image": "public.ecr.aws/x/y:1"}],
        }
    )
    findings = [str(p) for p in serving_findings(spec, "us-east-1")]
    assert findings == [
        "mlinfra:serving.cluster.availabilityZones: 3, but availabilityZoneIds lists 2; leave availabilityZones out "
        "or make them agree",
        "mlinfra:serving.cluster.availabilityZoneIds: EKS places no cluster in use1-az3 "
        "(UnsupportedAvailabilityZoneException)",
        "mlinfra:serving.nodePools.inf2.instanceTypes: none of cluster.availabilityZoneIds (use1-az3, use1-az1) "
        "offers every type of the pool; zones of us-east-1 that do: use1-az2, use1-az4, use1-az5, use1-az6",
    ]
