"""Replica.run (a replica's share of the requests between two events in one call, its state in locals) gives
exactly what the replica gave a request at a time before it (reference_replica.py): the same tally, histograms
included, and the same state and metrics at every event, bit for bit. The twin's figures depend on every bit."""

from __future__ import annotations

import math
import random

import pytest

from infra.serving.twin.replica import Replica, Tally
from tests.infra.serving.twin.reference_replica import ReferenceReplica
from tests.infra.serving.twin.twins import perf

Request = tuple[float, int, int]


def _workload(seed: int, rate: float) -> list[tuple[float, list[Request]]]:
    """Events (a scrape's time) each with the requests that arrive before it; prompt and output lengths spread
    wide, one-token outputs and requests at the same instant included."""
    rng = random.Random(seed)
    t, events = 0.0, []
    for _ in range(60):
        event = t + rng.choice((0.5, 5.0, 15.0))
        share = []
        while True:
            t += rng.expovariate(rate) if rng.random() > 0.05 else 0.0
            if t >= event:
                t = event
                break
            out = 1 if rng.random() < 0.05 else rng.randint(2, 900)
            share.append((t, rng.randint(1, 3000), out))
        events.append((event, share))
    return events


def _state(replica: Replica | ReferenceReplica, now: float) -> tuple[object, ...]:
    return (
        replica.t, replica.clock, replica.running, replica.kv_prompt, replica.kv_start, replica.prefill_free,
        list(replica.heap), list(replica.joins), list(replica.waiting), replica.metrics(now), replica.in_flight,
    )  # fmt: skip


def _tally(tally: Tally) -> tuple[object, ...]:
    return (
        tally.completed, tally.timed_out, tally.killed, tally.output_tokens, tally.unserved_tokens, tally.over_slo,
        dict(tally.ttft_ms), dict(tally.tpot_ms10),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("seed", "rate", "limit", "timeout"),
    [
        (0, 2.0, 256, 60.0),  # light: mostly one or two running
        (1, 20.0, 256, 60.0),  # heavy: large batches, the KV-cache steps
        (2, 30.0, 8, 5.0),  # over the limit: the waiting queue and its timeouts
        (3, 0.3, 1, 20.0),  # one at a time
    ],
)
def test_a_run_of_requests_is_a_request_at_a_time_exactly(seed, rate, limit, timeout):
    p = perf()
    tallies = [Tally() for _ in range(3)]
    args = (p.decode_step_seconds, p.prefill_seconds, limit, float(p.kv_capacity_tokens), timeout, (2.0, 0.1))
    reference = ReferenceReplica(*args, tallies[0], 0.0)
    batched, single = Replica(*args, tallies[1], 0.0), Replica(*args, tallies[2], 0.0)
    replicas: list[Replica | ReferenceReplica] = [reference, batched, single]
    for event, share in _workload(seed, rate):
        for request in share:
            reference.arrive(*request)
            single.arrive(*request)
        batched.run(share)
        for replica in replicas:
            replica.advance(event)
        assert _state(batched, event) == _state(reference, event) == _state(single, event)
    for replica in replicas:
        replica.advance(math.inf)
    assert tallies[0].completed > 20
    assert _tally(tallies[1]) == _tally(tallies[0]) == _tally(tallies[2])
    if limit < 256:
        assert tallies[0].timed_out > 0


def test_run_then_kill_loses_what_the_reference_loses():
    p = perf()
    args = (p.decode_step_seconds, p.prefill_seconds, 4, float(p.kv_capacity_tokens), 60.0, (2.0, 0.1))
    reference, batched = ReferenceReplica(*args, Tally(), 0.0), Replica(*args, Tally(), 0.0)
    share = [(0.1 * i, 200 + i, 300) for i in range(10)]
    for request in share:
        reference.arrive(*request)
    batched.run(share, 3.0)
    reference.advance(3.0)
    assert batched.kill() == reference.kill() > 0
    assert _tally(batched.tally) == _tally(reference.tally)
