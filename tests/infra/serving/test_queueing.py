"""p95 latencies of a fleet under load: at no load they are the replica's own times, they grow with the load,
and neither more replicas nor a faster device ever makes them worse."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.catalog.accelerators import device, precision
from infra.serving.performance import load_model_shape, replica_performance
from infra.serving.queueing import Lengths, Traffic, predict
from tests.helpers import ROOT

LLAMA_8B = load_model_shape(ROOT / "stacks" / "models" / "llama-3-8b" / "config.json")


def _replica(name: str = "L4", factor: float = 1.0, fmt: str = "fp16"):
    found = device(name)
    faster = dataclasses.replace(
        found,
        memory_bandwidth_gbps=found.memory_bandwidth_gbps * factor,
        dense_tflops={k: (v * factor if v else v) for k, v in found.dense_tflops.items()},
    )
    return replica_performance(LLAMA_8B, faster, precision(fmt), 1, 4096, 64)


def test_an_idle_fleet_answers_in_the_replicas_own_times():
    perf = _replica()
    low = predict(perf, Traffic(0.001, Lengths.fixed(512), Lengths.fixed(128)), replicas=1)
    assert low.feasible
    assert low.ttft_p95_seconds == pytest.approx(perf.prefill_seconds(512) + perf.decode_step_seconds(1, 576), 0.05)
    assert low.tpot_p95_seconds == pytest.approx(perf.decode_step_seconds(1, 576), 0.1)


def test_a_load_beyond_the_replicas_is_saturated_with_the_reason():
    prediction = predict(_replica(), Traffic(500, Lengths.fixed(512), Lengths.fixed(256)), replicas=1)
    assert not prediction.feasible and math.isinf(prediction.ttft_p95_seconds)
    assert prediction.saturated.startswith(("prefills alone take", "decoding needs more than"))


def test_longer_tails_of_prompt_lengths_wait_longer():
    perf = _replica()
    fixed = predict(perf, Traffic(0.5, Lengths.fixed(1000), Lengths.fixed(200)), 1)
    spread = predict(perf, Traffic(0.5, Lengths(1000, 4000), Lengths.fixed(200)), 1)
    assert fixed.feasible and spread.ttft_p95_seconds > fixed.ttft_p95_seconds
    assert Lengths(1000, 4000).scv > 0 == Lengths.fixed(1000).scv


TRAFFIC = st.builds(
    Traffic,
    rate_per_second=st.floats(0.01, 40),
    prompt=st.builds(Lengths.fixed, st.integers(16, 3000)),
    output=st.builds(Lengths.fixed, st.integers(8, 800)),
)


@settings(max_examples=80, deadline=None)
@given(traffic=TRAFFIC, replicas=st.integers(1, 12), more=st.integers(1, 12))
def test_more_replicas_never_worsen_predicted_p95(traffic, replicas, more):
    perf = _replica()
    fewer, many = predict(perf, traffic, replicas), predict(perf, traffic, replicas + more)
    assert many.ttft_p95_seconds <= fewer.ttft_p95_seconds + 1e-12
    assert many.tpot_p95_seconds <= fewer.tpot_p95_seconds + 1e-12
    assert fewer.feasible <= many.feasible


@settings(max_examples=80, deadline=None)
@given(traffic=TRAFFIC, replicas=st.integers(1, 8), factor=st.floats(1.0, 6.0))
def test_a_faster_device_never_worsens_predicted_p95(traffic, replicas, factor):
    slow, fast = predict(_replica(), traffic, replicas), predict(_replica(factor=factor), traffic, replicas)
    assert fast.ttft_p95_seconds <= slow.ttft_p95_seconds + 1e-12
    assert fast.tpot_p95_seconds <= slow.tpot_p95_seconds + 1e-12
