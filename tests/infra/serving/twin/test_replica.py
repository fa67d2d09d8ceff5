"""One replica's continuous batching against the performance model it runs: a request alone takes the prefill
and its decode steps exactly; batching, the concurrency limit and the timeout behave as described."""

from __future__ import annotations

import math

import pytest

from infra.serving.twin.replica import Replica, Tally
from tests.infra.serving.twin.twins import perf


def _replica(limit: int = 256, timeout: float = 60.0, tally: Tally | None = None) -> tuple[Replica, Tally]:
    p = perf()
    tally = tally or Tally()
    replica = Replica(
        lambda n, kv: p.decode_step_seconds(n, kv), p.prefill_seconds, limit, float(p.kv_capacity_tokens),
        timeout, (2.0, 0.1), tally, 0.0,
    )  # fmt: skip
    return replica, tally


def _only(histogram: dict[int, int]) -> int:
    assert sum(histogram.values()) == 1
    return next(iter(histogram))


def test_a_request_alone_takes_its_prefill_then_one_step_per_token():
    p = perf()
    replica, tally = _replica()
    replica.arrive(1.0, 500, 101)
    replica.advance(math.inf)
    assert tally.completed == 1 and tally.output_tokens == 101
    assert _only(tally.ttft_ms) == int(p.prefill_seconds(500) * 1000)
    # KV held grows by one token per step from 500; the step time is linear in it, so the mean step is at 550
    tpot = p.decode_step_seconds(1, 550)
    assert _only(tally.tpot_ms10) == pytest.approx(tpot * 10000, abs=1)


def test_prefills_queue_one_after_another():
    p = perf()
    replica, tally = _replica()
    replica.arrive(0.0, 1000, 1)
    replica.arrive(0.0, 1000, 1)
    replica.advance(math.inf)
    assert sorted(tally.ttft_ms) == [int(p.prefill_seconds(1000) * 1000), int(2 * p.prefill_seconds(1000) * 1000)]


def test_a_batch_shares_each_step():
    p = perf()
    replica, tally = _replica()
    for _ in range(8):
        replica.arrive(0.0, 100, 201)
    replica.advance(math.inf)
    assert tally.completed == 8
    # eight sequences decoding together: each step is the step of a batch of 8 (slower than alone, far faster
    # than eight in turn)
    alone, shared = p.decode_step_seconds(1, 200), p.decode_step_seconds(8, 8 * 200)
    slowest = max(tally.tpot_ms10) / 10000
    assert alone < slowest < 8 * alone
    assert slowest == pytest.approx(shared, rel=0.1)


def test_over_the_limit_requests_wait_and_report_as_waiting():
    replica, tally = _replica(limit=2)
    for _ in range(5):
        replica.arrive(0.0, 100, 50)
    replica.advance(0.0001)
    waiting, running, _ = replica.metrics(0.0001)
    assert (waiting, running) == (4.0, 1.0)  # one prefilling, one queued for prefill, three over the limit
    replica.advance(math.inf)
    assert tally.completed == 5


def test_a_request_that_waited_past_the_timeout_is_not_served():
    replica, tally = _replica(limit=1, timeout=1.0)
    replica.arrive(0.0, 100, 400)  # takes several seconds
    replica.arrive(0.0, 100, 10)
    replica.advance(math.inf)
    assert (tally.completed, tally.timed_out) == (1, 1)


def test_kill_counts_every_request_held():
    replica, tally = _replica(limit=1)
    for _ in range(3):
        replica.arrive(0.0, 100, 400)
    replica.advance(1.0)
    assert replica.kill() == 3
    assert tally.killed == 3 and replica.in_flight == 0
