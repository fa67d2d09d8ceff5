"""Lustre sizing: always an allowed step, meets the targets, and nothing cheaper does."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.training.aws.lustre import (
    CAPACITY_RULES,
    DEPLOYMENT_TYPES,
    GIB_PER_TIB,
    HOURS_PER_MONTH,
    LUSTRE_VERSION,
    FsxIntent,
    LustrePlan,
    capacity_problem,
    meets_targets,
    monthly_cost,
    size_lustre,
    sizing_tiers,
    throughput_problem,
)
from infra.training.lustre import LustreSizingError

# ---- allowed steps and their messages -------------------------------------------------------------


@pytest.mark.parametrize("gib", [1200, 2400, 4800, 7200, 96000])
@pytest.mark.parametrize("deployment", ["SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"])
def test_ssd_capacities_are_1200_or_multiples_of_2400(deployment, gib):
    assert capacity_problem(deployment, gib) is None


@pytest.mark.parametrize("gib", [1200, 2400, 3600, 7200, 36000])
def test_scratch1_capacities(gib):
    assert capacity_problem("SCRATCH_1", gib) is None


def test_capacity_problem_messages():
    assert capacity_problem("PERSISTENT_2", 4000) == (
        "4000 GiB is not a PERSISTENT_2 storage capacity; allowed: 1200 GiB or a multiple of 2400 GiB "
        "(nearest: 2400, 4800)"
    )
    assert capacity_problem("PERSISTENT_2", 1000) == (
        "1000 GiB is not a PERSISTENT_2 storage capacity; allowed: 1200 GiB or a multiple of 2400 GiB (nearest: 1200)"
    )
    assert capacity_problem("SCRATCH_1", 4800) == (
        "4800 GiB is not a SCRATCH_1 storage capacity; allowed: 1200 GiB, 2400 GiB or a multiple of "
        "3600 GiB (nearest: 3600, 7200)"
    )
    assert capacity_problem("SCRATCH_2", 0) == (
        "0 GiB is not a SCRATCH_2 storage capacity; allowed: 1200 GiB or a multiple of 2400 GiB (nearest: 1200)"
    )
    assert capacity_problem("SCRATCH_3", 1200) == (
        "'SCRATCH_3' is not an FSx for Lustre deployment type; allowed: SCRATCH_1, SCRATCH_2, PERSISTENT_1, "
        "PERSISTENT_2"
    )


def test_throughput_problem_messages():
    assert throughput_problem("PERSISTENT_2", 300) == (
        "300 is not a PERSISTENT_2 throughput; allowed: 125, 250, 500, 1000 MB/s/TiB"
    )
    assert throughput_problem("PERSISTENT_1", 125) == (
        "125 is not a PERSISTENT_1 throughput; allowed: 50, 100, 200 MB/s/TiB"
    )
    assert throughput_problem("PERSISTENT_2", None) == (
        "PERSISTENT_2 needs a per-unit throughput; allowed: 125, 250, 500, 1000 MB/s/TiB"
    )
    assert throughput_problem("SCRATCH_2", 200) == (
        "SCRATCH_2 has a fixed baseline of 200 MB/s/TiB; leave the per-unit throughput unset "
        "(it applies to PERSISTENT_1, PERSISTENT_2 only)"
    )


@pytest.mark.parametrize(
    ("deployment", "per_unit"),
    [("PERSISTENT_2", v) for v in (125, 250, 500, 1000)]
    + [("PERSISTENT_1", v) for v in (50, 100, 200)]
    + [("SCRATCH_1", None), ("SCRATCH_2", None)],
)
def test_allowed_throughputs(deployment, per_unit):
    assert throughput_problem(deployment, per_unit) is None


# ---- intents --------------------------------------------------------------------------------------


def test_bad_intents_name_the_field():
    with pytest.raises(LustreSizingError) as err:
        FsxIntent(dataset_gib=-1, checkpoint_gib=10, checkpoint_write_seconds=0, read_throughput_gbps=1)
    assert str(err.value) == (
        "dataset_gib must be a number >= 0 (got -1); checkpoint_write_seconds must be > 0 (got 0)"
    )
    with pytest.raises(LustreSizingError, match=r"^headroom must be >= 1.0 \(got 0.9\)$"):
        FsxIntent(1, 1, 1, 1, headroom=0.9)


def test_pinned_types_must_support_data_repository_associations():
    with pytest.raises(LustreSizingError) as err:
        FsxIntent(1, 1, 1, 1, deployment_type="SCRATCH_1")
    assert str(err.value) == (
        "deployment_type: SCRATCH_1 does not support data repository associations; "
        "allowed: PERSISTENT_1, PERSISTENT_2, SCRATCH_2"
    )
    with pytest.raises(LustreSizingError) as err:
        FsxIntent(1, 1, 1, 1, deployment_type="PERSISTENT_1")
    assert str(err.value) == (
        "deployment_type: PERSISTENT_1 has no sourced price to size against; allowed: PERSISTENT_2, SCRATCH_2"
    )


def test_sizing_never_offers_scratch1_or_unpriced_tiers():
    assert {t.deployment_type for t in sizing_tiers()} == {"SCRATCH_2", "PERSISTENT_2"}
    assert all(t.usd_per_gb_month and t.price_source for t in sizing_tiers())


# ---- known examples -------------------------------------------------------------------------------


def test_checkpoint_bound_example():
    plan = size_lustre(FsxIntent(2000, 1000, 600, 0, deployment_type="PERSISTENT_2"))
    assert (plan.deployment_type, plan.storage_capacity_gib, plan.per_unit_storage_throughput) == (
        "PERSISTENT_2",
        4800,
        500,
    )
    assert plan.aggregate_throughput_mbps == pytest.approx(4800 / 1024 * 500)
    assert plan.monthly_cost_usd == pytest.approx(4800 * 0.34)
    assert plan.hourly_cost_usd == pytest.approx(4800 * 0.34 / 730)
    assert plan.file_system_type_version == LUSTRE_VERSION
    assert plan.reasons == (
        "deployment PERSISTENT_2 500 MB/s/TiB: the cheapest that meets every target among the 4 priced "
        "PERSISTENT_2 tiers (pinned by deployment_type)",
        "capacity 4800 GiB: dataset 2000 + 2 x checkpoint 1000 GiB x 1.2 headroom = 4800",
        "throughput 500 MB/s/TiB: checkpoint 1000 GiB in 600 s needs 1790 MB/s of writes; 4800 GiB gives "
        "2343 MB/s read, 2343 MB/s write",
        "cost $2.24/hour ($1632.00/month): 4800 GiB x $0.340 per GB-month, us-east-1 list price: mlinfra field "
        "reference (docs/reference.md 'FSx for Lustre': persistent 500 MB/s/TiB), as of 2026-01",
    )


def test_small_run_takes_the_smallest_scratch_step_and_says_it_is_not_replicated():
    plan = size_lustre(FsxIntent(100, 10, 600, 0))
    assert (plan.deployment_type, plan.storage_capacity_gib, plan.per_unit_storage_throughput) == (
        "SCRATCH_2",
        1200,
        None,
    )
    assert plan.monthly_cost_usd == pytest.approx(1200 * 0.14)
    assert plan.reasons[1] == (
        "capacity 1200 GiB: dataset 100 + 2 x checkpoint 10 GiB x 1.2 headroom = 144, rounded up to an "
        "allowed step (1200 GiB or a multiple of 2400 GiB)"
    )
    assert plan.reasons[-1] == (
        "SCRATCH_2 is not replicated: a file server failure loses what is not yet exported to S3; "
        "set deployment_type PERSISTENT_2 for replicated storage"
    )


def test_scratch_writes_at_half_its_read_rate():
    # 1790 MB/s of checkpoint writes at 100 MB/s/TiB would need 18.3 TiB of SCRATCH_2 (19200 GiB,
    # $2688/month); PERSISTENT_2 500 at 4800 GiB costs $1632/month.
    plan = size_lustre(FsxIntent(2000, 1000, 600, 0))
    assert (plan.deployment_type, plan.per_unit_storage_throughput, plan.storage_capacity_gib) == (
        "PERSISTENT_2",
        500,
        4800,
    )


def test_large_read_target_is_throughput_bound():
    # docs/reference.md seed: 100 GB/s (800 Gbit/s) of reads on a large cluster, 2 TB checkpoints.
    plan = size_lustre(FsxIntent(50_000, 2000, 300, 800))
    assert (plan.deployment_type, plan.per_unit_storage_throughput, plan.storage_capacity_gib) == (
        "PERSISTENT_2",
        1000,
        103_200,
    )
    assert plan.aggregate_throughput_mbps >= 100_000
    assert plan.reasons[1] == (
        "capacity 103200 GiB: set by throughput; the data alone needs dataset 50000 + 2 x checkpoint 2000 GiB "
        "x 1.2 headroom = 64800 GiB"
    )


# ---- properties -----------------------------------------------------------------------------------

intents = st.builds(
    FsxIntent,
    dataset_gib=st.floats(0, 200_000),
    checkpoint_gib=st.floats(0, 5_000),
    checkpoint_write_seconds=st.floats(10, 7200),
    read_throughput_gbps=st.floats(0, 300),
    deployment_type=st.sampled_from([None, "SCRATCH_2", "PERSISTENT_2"]),
    headroom=st.floats(1, 2),
)


def cheaper_options(plan: LustrePlan, intent: FsxIntent):
    """Brute force: every priced tier x every allowed step, up to the most capacity that could cost
    less than the plan; yields the options that meet the intent and are cheaper (or as cheap and smaller)."""
    cheapest_price = min(t.usd_per_gb_month for t in sizing_tiers())
    limit = int(plan.monthly_cost_usd / cheapest_price) + 1
    for tier in sizing_tiers(intent.deployment_type):
        rule = CAPACITY_RULES[tier.deployment_type]
        steps = sorted({*rule.singles, *range(rule.increment, limit + rule.increment, rule.increment)})
        for capacity in steps:
            assert capacity_problem(tier.deployment_type, capacity) is None
            cost = monthly_cost(tier, capacity)
            if cost > plan.monthly_cost_usd + 1e-6:
                break
            if not meets_targets(tier, capacity, intent):
                continue
            if cost < plan.monthly_cost_usd - 1e-6 or capacity < plan.storage_capacity_gib:
                yield tier, capacity, cost


@settings(max_examples=300, deadline=None)
@given(intents)
def test_plan_is_allowed_meets_targets_and_nothing_cheaper_does(intent):
    plan = size_lustre(intent)
    assert capacity_problem(plan.deployment_type, plan.storage_capacity_gib) is None
    assert throughput_problem(plan.deployment_type, plan.per_unit_storage_throughput) is None
    if intent.deployment_type:
        assert plan.deployment_type == intent.deployment_type
    tib = plan.storage_capacity_gib / GIB_PER_TIB
    assert plan.storage_capacity_gib >= round(intent.capacity_needed_gib, 6)
    assert round(plan.aggregate_throughput_mbps, 6) >= round(intent.read_mbps_needed, 6)
    assert round(plan.write_throughput_mbps, 6) >= round(intent.write_mbps_needed, 6)
    assert (
        plan.write_throughput_mbps
        <= plan.aggregate_throughput_mbps
        == pytest.approx(tib * (plan.per_unit_storage_throughput or 200))
    )
    assert plan.hourly_cost_usd == pytest.approx(plan.monthly_cost_usd / HOURS_PER_MONTH)
    assert list(cheaper_options(plan, intent)) == []
    assert all(isinstance(r, str) and r for r in plan.reasons)


def test_deployment_types_are_the_four_aws_types():
    assert DEPLOYMENT_TYPES == ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2")
    assert set(CAPACITY_RULES) == set(DEPLOYMENT_TYPES)


def test_pins_replace_sized_values_and_say_what_they_miss():
    from infra.training.aws.lustre import size_lustre_pinned

    intent = FsxIntent(1200, 500, 600, 10)
    assert size_lustre_pinned(intent) == size_lustre(intent)
    plan = size_lustre_pinned(intent, capacity_gib=2400, per_unit=250)
    assert (plan.deployment_type, plan.storage_capacity_gib, plan.per_unit_storage_throughput) == (
        "PERSISTENT_2",
        2400,
        250,
    )
    assert plan.reasons[1] == "capacity 2400 GiB: pinned by storageCapacityGib (the data needs 2640 GiB with headroom)"
    assert plan.reasons[-1] == "the pinned values miss a target above; drop the pins to size for every target"
    # Only the capacity pinned: the cheapest per-unit throughput that meets the targets at that size.
    plan = size_lustre_pinned(FsxIntent(100, 10, 600, 0), capacity_gib=4800)
    assert (plan.storage_capacity_gib, plan.per_unit_storage_throughput) == (4800, 125)
    assert "miss" not in plan.reasons[-1]


def test_pins_must_be_allowed_steps():
    from infra.training.aws.lustre import size_lustre_pinned

    with pytest.raises(LustreSizingError, match="300 is not a PERSISTENT_2 throughput"):
        size_lustre_pinned(FsxIntent(1, 1, 1, 1), per_unit=300)
    with pytest.raises(LustreSizingError):
        size_lustre_pinned(FsxIntent(1, 1, 1, 1), capacity_gib=1300)


def test_the_read_target_is_in_gigabits_as_its_key_is_named():
    # readThroughputGbps: 8 Gbit/s is 1,000 MB/s (it was read as 8 GB/s, 8,000 MB/s: the demo's file system came out
    # as 26,400 GiB of SCRATCH_2 at $5.06/h where 2,400 GiB of PERSISTENT_2 at $1.12/h meets every target).
    assert FsxIntent(0, 0, 300, 8).read_mbps_needed == 1000
    demo = size_lustre(FsxIntent(1200, 200, 300, 5))
    assert (demo.deployment_type, demo.storage_capacity_gib) == ("PERSISTENT_2", 2400)
    assert "reading 5 Gbit/s needs 625 MB/s" in demo.reasons[2]
