"""Scale to zero in the twin: the front door's hold, the held requests that wake the pool, the schedule's minimums,
and the peers' failures (issue 33) as named scenarios, each caught by a check or fixed by the design."""

from __future__ import annotations

from dataclasses import replace

import pytest

from infra.serving.queueing import Lengths
from infra.serving.servers import HELD_METRIC
from infra.serving.twin.engine import simulate
from infra.serving.twin.figures import figures
from infra.serving.twin.keda import Query, Trigger, parse_query
from infra.serving.twin.settings import Hold
from infra.serving.twin.traces import Shape, generate
from tests.infra.serving.twin.twins import group, scaled, twin

HELD = Trigger("held", parse_query(f'sum({HELD_METRIC}{{namespace="models",inference_pool="m"}}) or vector(0)'),
               "AverageValue", 8.0)  # fmt: skip
HOLD = Hold(240.0, 200)
NODE_READY, POD_START, PULL = 150.0, 150.0, 500.0  # twins.py's group and twin: 800 s from zero


def at_zero(hold: Hold | None = HOLD, cooldown: float = 900.0, nodes: int = 0, **changes):
    """A model at zero, its pool empty (or `nodes` up, holding the image), woken by the held requests."""
    base = scaled(min_replicas=0, cooldown_seconds=cooldown)
    triggers = (*base.triggers, HELD) if hold is not None else base.triggers
    return twin(
        scaled=replace(base, triggers=triggers),
        node_groups=(group(min_size=0, desired=nodes),),
        initial_replicas=0,
        hold=hold,
        timeout_seconds=600.0,
        routing="picker",
        **changes,
    )


def requests(*times: float) -> list[tuple[float, int, int]]:
    return [(t, 256, 64) for t in times]


def test_a_request_at_zero_on_an_empty_pool_is_held_then_answered_503_and_wakes_the_pool():
    """The cold start (node, image, weights, engine: 800 s) outlasts the hold (240 s): the first request is answered
    503 with Retry-After at its hold's end, but it woke the pool, so the client's retry is served."""
    outcome = simulate(at_zero(), requests(60.0, 60.0 + 240 + 30 + 600), 3600)
    f = figures(outcome)
    assert (f.held, f.held_out, f.completed) == (1, 1, 1)
    ready_at = next(t for t, _, ready, _ in outcome.series if ready > 0)
    assert 60 + NODE_READY + PULL + POD_START <= ready_at <= 60 + 900  # woken by the one held request


def test_a_request_at_zero_on_a_node_still_up_is_held_and_served():
    """Minutes after the last replica went, its node is still there with the image: a start (150 s) fits the
    hold, so the request waits and is served, its wait in its TTFT."""
    f = figures(simulate(at_zero(nodes=1), requests(60.0), 1800))
    assert (f.held, f.held_out, f.completed, f.refused) == (1, 0, 1, 0)
    assert f.ttft_ms["p50"] >= POD_START * 1000


def test_more_than_the_queue_holds_are_refused_at_once():
    f = figures(simulate(at_zero(hold=Hold(240.0, 3), nodes=1), requests(*[60.0 + i / 10 for i in range(5)]), 1800))
    assert (f.held, f.refused, f.completed) == (3, 2, 3)


def test_peer_failure_404_at_zero_the_demand_disappears_and_the_model_never_comes_back():
    """vllm-project/production-stack#1003: the router refuses while the pool is empty (there, 404), nothing counts
    the refused requests, and the engines' own metrics vanish with the last pod: the model stays at zero for ever.
    Fixed by the design: the picker holds the requests and KEDA wakes the pool on them (the test above)."""
    f = figures(simulate(at_zero(hold=None), requests(*[60.0 * i for i in range(1, 50)]), 3600))
    assert f.completed == 0 and f.refused == 49 and f.replicas_max == 0


def test_peer_failure_empty_metric_every_query_answers_zero_without_pods():
    """llm-d#1981: KEDA treats an empty Prometheus answer as no activity (ignoreNullValues, its default) or an error
    (no scaling at all). Every query mlinfra writes ends in `or vector(0)`: zero, never empty, and the twin reads
    an empty pool as 0 the same way."""
    for trigger in (*scaled().triggers, HELD):
        assert isinstance(trigger.query, Query) and trigger.query.value([]) == 0.0


def test_peer_failure_cooldown_shorter_than_the_cold_start_flaps():
    """A cooldown shorter than the start-up from zero (here 60 s against 800 s) under sparse traffic: the pool goes
    before the next request and every request pays a cold start. The config check refuses such a cooldown
    (scaleToZero.cooldownSeconds); with the derived one (the budget, rounded up) the pool stays up between them."""
    sparse = requests(*[300.0 + 900.0 * i for i in range(8)])
    short = figures(simulate(at_zero(cooldown=60.0), sparse, 8 * 900 + 1200))
    derived = figures(simulate(at_zero(cooldown=900.0), sparse, 8 * 900 + 1200))
    assert short.held_out > derived.held_out
    assert short.scale_changes > derived.scale_changes
    assert derived.completed > short.completed


WEEK_WINDOWS = tuple((d * 86400 + 7 * 3600 - 900.0, d * 86400 + 20 * 3600.0, 2.0) for d in range(5))


@pytest.fixture(scope="module")
def office_day():
    schedule = Trigger("schedule-0", Query("schedule", "sum", 0.0, windows=WEEK_WINDOWS), "AverageValue", 1.0)
    zero = at_zero(cooldown=900.0)
    scheduled = replace(zero, scaled=replace(zero.scaled, triggers=(*zero.scaled.triggers, schedule)), routing="picker")
    shape = Shape("office", 1.0, 86400, Lengths(512, 1536), Lengths(256, 768), 4096, 0)
    always = twin(scaled=scaled(min_replicas=2), node_groups=(group(min_size=0, desired=2),))
    return (
        simulate(scheduled, generate(shape), 86400),
        simulate(always, generate(shape), 86400),
    )


def test_a_scheduled_day_is_at_zero_at_night_ready_at_the_window_and_loses_nothing(office_day):
    outcome, always = office_day
    f = figures(outcome)
    assert f.requests > 0 and f.completed == f.requests  # none lost: none arrives before the replicas serve
    ready = {round(t): r for t, _, r, _ in outcome.series}
    assert ready[6 * 3600] == 0 and ready[23 * 3600] == 0  # the night at zero
    assert ready[7 * 3600] >= 2  # asked for ahead by the start-up budget: serving when the window opens
    saved = figures(always).cost_usd - f.cost_usd
    assert saved > 0.4 * figures(always).cost_usd  # 13 of 24 hours with nodes, against the minimum of 2 all day
