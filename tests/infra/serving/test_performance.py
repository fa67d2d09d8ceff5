"""The performance model of one replica: the memory fit with its figures, and prefill and decode times that
behave as the roofline says (more work never takes less time, a faster device never more)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.catalog.accelerators import device, precision
from infra.serving.performance import ReplicaDoesNotFit, load_model_shape, memory_fit, replica_performance
from tests.helpers import ROOT

MODELS = ROOT / "stacks" / "models"
LLAMA_8B = load_model_shape(MODELS / "llama-3-8b" / "config.json")
LLAMA_70B = load_model_shape(MODELS / "llama-3-70b" / "config.json")


def test_70b_bf16_on_one_a10g_is_refused_with_the_memory_figures():
    with pytest.raises(ReplicaDoesNotFit) as refused:
        replica_performance(LLAMA_70B, device("A10G"), precision("bf16"), 1, 4096, 256)
    assert str(refused.value) == (
        "the model at bf16 needs 131.4 GiB of weights (bf16) + 1.2 GiB of KV cache for one sequence of 4096 tokens "
        "(bf16, 320 KiB per token) + 1.5 GiB runtime overhead = 134.2 GiB; the engine gets 20.1 GiB of 1 x A10G "
        "(22.4 GiB each), 114.1 GiB short"
    )


def test_8b_with_a_128k_context_does_not_fit_a_24_gb_device():
    for name in ("A10G", "L4"):
        fit = memory_fit(LLAMA_8B, device(name), precision("bf16"), 1, 131072, 256, model="llama-3-8b")
        assert not fit.fits
        assert "16.0 GiB of KV cache for one sequence of 131072 tokens" in fit.explain()
    # ... but it fits where the memory is.
    assert memory_fit(LLAMA_8B, device("A100-80GB"), precision("bf16"), 1, 131072, 256).fits


def test_neuron_holds_every_batch_slot_at_full_length():
    fit = memory_fit(LLAMA_8B, device("Inferentia2"), precision("bf16"), 1, 4096, 8)
    assert fit.full_length_sequences == 8 and fit.kv_needed == 8 * 4096 * 128 * 1024
    assert not memory_fit(LLAMA_8B, device("Inferentia2"), precision("bf16"), 1, 8192, 32).fits


def test_the_kv_cache_bounds_the_sequences_a_replica_runs():
    perf = replica_performance(LLAMA_8B, device("A10G"), precision("bf16"), 1, 4096, 256)
    assert perf.max_num_seqs == perf.kv_capacity_tokens // 4096 < 256
    assert perf.concurrency_limit(1024) == perf.kv_capacity_tokens // 1024
    int4 = replica_performance(LLAMA_8B, device("A10G"), precision("int4"), 1, 4096, 256)
    assert int4.kv_capacity_tokens > perf.kv_capacity_tokens and int4.decode_step_seconds(1, 512) < (
        perf.decode_step_seconds(1, 512)
    )


def test_two_devices_split_the_weights():
    one = replica_performance(LLAMA_8B, device("L4"), precision("bf16"), 1, 4096, 64)
    two = replica_performance(LLAMA_8B, device("L4"), precision("bf16"), 2, 4096, 64)
    assert two.kv_capacity_tokens > 2 * one.kv_capacity_tokens
    assert two.decode_step_seconds(1, 1024) < one.decode_step_seconds(1, 1024)


def _faster(name: str, factor: float):
    slow = device(name)
    return dataclasses.replace(
        slow,
        memory_bandwidth_gbps=slow.memory_bandwidth_gbps * factor,
        dense_tflops={k: (v * factor if v else v) for k, v in slow.dense_tflops.items()},
    )


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(["T4", "A10G", "L4", "L40S", "Inferentia2", "A100-40GB"]),
    prompt=st.integers(1, 4000),
    more=st.integers(0, 4000),
    batch=st.integers(1, 64),
    context=st.integers(1, 200_000),
    factor=st.floats(1.0, 8.0),
)
def test_more_work_takes_longer_and_a_faster_device_never_longer(name, prompt, more, batch, context, factor):
    fp16 = precision("fp16")
    perf = replica_performance(LLAMA_8B, device(name), fp16, 2, 8192, 8)
    fast = replica_performance(LLAMA_8B, _faster(name, factor), fp16, 2, 8192, 8)
    assert perf.prefill_seconds(prompt + more) >= perf.prefill_seconds(prompt) > 0
    assert perf.decode_step_seconds(batch + 1, context + more) >= perf.decode_step_seconds(batch, context) > 0
    assert fast.prefill_seconds(prompt) <= perf.prefill_seconds(prompt)
    assert fast.decode_step_seconds(batch, context) <= perf.decode_step_seconds(batch, context)


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 64), prompt=st.integers(1, 4096), output=st.integers(1, 600))
def test_decode_seconds_is_the_sum_of_its_steps(batch, prompt, output):
    perf = replica_performance(LLAMA_8B, device("L40S"), precision("fp8"), 1, 8192, 64)
    steps = sum(perf.decode_step_seconds(batch, batch * (prompt + t)) for t in range(output - 1))
    assert perf.decode_seconds(batch, prompt, output) == pytest.approx(steps, rel=1e-9, abs=1e-12)
