"""How fast one replica serves a model on a device, and whether it fits at all (pure; docs/sizing.md).

A roofline model with efficiency factors fitted to published measurements
(`infra/catalog/data/serving_calibration.json`):

- **Memory.** The engine takes a share of each device (vLLM's gpu_memory_utilization; all of a Neuron
  device) less the runtime's overhead; the weights at the precision's weight format take their part; what is
  left holds the KV cache, at the precision's KV format (KV heads replicated when there are more shards than
  KV heads). On a GPU (paged attention) at least one sequence of maxModelLen must fit, as vLLM checks at start;
  on Neuron the cache is static, maxNumSeqs x maxModelLen.
- **Prefill** is bound by compute: 2 FLOPs per active parameter per prompt token plus causal attention,
  at the activation format's dense peak times the prefill efficiency, or by reading the weights once.
- **A decode step** (continuous batching: one token for each running sequence) is bound by memory bandwidth:
  the weights plus every running sequence's KV cache are read once per step, at peak bandwidth times the
  decode efficiency, unless the batch's FLOPs take longer. Each step pays a fixed overhead (scheduling,
  kernel launches, sampling) and, across shards, two all-reduces per layer.

The queueing model that turns these into p95 latencies under an offered load is in queueing.py.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files

from infra.catalog.accelerators import Device, Precision, runtime_memory
from infra.serving.model_shape import ModelConfigError, ModelShape, load_model_shape, model_shape

__all__ = [
    "Efficiency",
    "MemoryFit",
    "ModelConfigError",
    "ModelShape",
    "ReplicaDoesNotFit",
    "ReplicaPerformance",
    "efficiency",
    "load_model_shape",
    "memory_fit",
    "model_shape",
    "replica_performance",
]
GIB = 1024**3


class ReplicaDoesNotFit(ValueError):
    """The weights, the KV cache the engine needs and the runtime overhead exceed the replica's devices."""

    def __init__(self, fit: MemoryFit):
        self.fit = fit
        super().__init__(fit.explain())


@dataclass(frozen=True)
class Efficiency:
    """Shares of the datasheet peaks a serving engine reaches, and its fixed costs, per device kind
    (fitted to the calibration points marked for tuning)."""

    decode_bandwidth: float  # share of peak memory bandwidth a decode step reaches
    prefill_compute: float  # share of peak dense compute a prefill reaches
    step_overhead_seconds: float  # per engine step: scheduling, kernel launches
    sequence_overhead_seconds: float  # per running sequence per step: sampling, detokenising, bookkeeping
    allreduce_seconds: float  # one all-reduce across the shards (two per layer per step)


@functools.cache
def _calibration() -> Mapping[str, object]:
    return json.loads((files("infra.catalog") / "data" / "serving_calibration.json").read_text(encoding="utf-8"))


def efficiency(kind: str) -> Efficiency:
    """The fitted efficiency of a device kind ("gpu", "neuron")."""
    raw = _calibration()["efficiency"][kind]  # type: ignore[index]
    return Efficiency(
        raw["decodeBandwidth"],
        raw["prefillCompute"],
        raw["stepOverheadSeconds"],
        raw["sequenceOverheadSeconds"],
        raw["allreduceSeconds"],
    )


@dataclass(frozen=True)
class MemoryFit:
    """The memory arithmetic of one replica, in bytes, for messages and the fit check."""

    model: str
    device: str
    precision: Precision
    devices: int
    max_model_len: int
    full_length_sequences: int  # sequences of max_model_len the engine must hold at once
    device_memory: float  # one device's memory
    available: float  # what the engine takes of the devices, less the runtime overhead
    weights: float
    kv_per_token: float
    overhead: float

    @property
    def kv_needed(self) -> float:
        return self.kv_per_token * self.max_model_len * self.full_length_sequences

    @property
    def fits(self) -> bool:
        return self.weights + self.kv_needed <= self.available

    @property
    def kv_capacity_tokens(self) -> int:
        return max(0, int((self.available - self.weights) // self.kv_per_token))

    def explain(self) -> str:
        sequences = (
            f"{self.full_length_sequences} sequences x {self.max_model_len} tokens"
            if self.full_length_sequences > 1
            else f"one sequence of {self.max_model_len} tokens"
        )
        total = self.available + self.overhead
        return (
            f"{self.model} at {self.precision.name} needs {self.weights / GIB:.1f} GiB of weights "
            f"({self.precision.weights}) + {self.kv_needed / GIB:.1f} GiB of KV cache for {sequences} "
            f"({self.precision.kv_cache}, {self.kv_per_token / 1024:.0f} KiB per token) + "
            f"{self.overhead / GIB:.1f} GiB runtime overhead = "
            f"{(self.weights + self.kv_needed + self.overhead) / GIB:.1f} GiB; the engine gets {total / GIB:.1f} GiB "
            f"of {self.devices} x {self.device} ({self.device_memory / GIB:.1f} GiB each)"
            + ("" if self.fits else f", {(self.weights + self.kv_needed - self.available) / GIB:.1f} GiB short")
        )


def memory_fit(
    shape: ModelShape,
    device: Device,
    precision: Precision,
    tensor_parallel: int,
    max_model_len: int,
    max_num_seqs: int,
    model: str = "the model",
) -> MemoryFit:
    """Whether weights + the KV cache the engine needs + runtime overhead fit `tensor_parallel` devices."""
    runtime = runtime_memory(device.kind)
    overhead = runtime.overhead_gib_per_device * GIB * tensor_parallel
    return MemoryFit(
        model=model,
        device=device.name,
        precision=precision,
        devices=tensor_parallel,
        max_model_len=max_model_len,
        # Neuron allocates the cache statically for every batch slot; paged attention needs one full sequence.
        full_length_sequences=max_num_seqs if device.kind == "neuron" else 1,
        device_memory=device.memory_bytes,
        available=device.memory_bytes * tensor_parallel * runtime.utilization - overhead,
        weights=shape.weight_bytes(precision.weights),
        kv_per_token=shape.kv_bytes_per_token(precision.kv_cache, tensor_parallel * device.engine_shards),
        overhead=overhead,
    )


@dataclass(frozen=True)
class ReplicaPerformance:
    """One replica: a model on `devices` devices at a precision, with an engine's max_model_len/max_num_seqs."""

    shape: ModelShape
    device: Device
    precision: Precision
    devices: int
    max_model_len: int
    max_num_seqs: int  # sequences at once, after the KV-cache memory bound (full-length sequences)
    configured_max_num_seqs: int
    kv_capacity_tokens: int
    fit: MemoryFit
    efficiency: Efficiency

    @property
    def shards(self) -> int:
        return self.devices * self.device.engine_shards

    def _sync_seconds(self) -> float:
        return 0.0 if self.shards == 1 else 2 * self.shape.layers * self.efficiency.allreduce_seconds

    def _compute_seconds(self, flops: float) -> float:
        peak = self.device.peak_flops(self.precision.activations) * self.devices
        return flops / (peak * self.efficiency.prefill_compute)

    def _memory_seconds(self, nbytes: float) -> float:
        bandwidth = self.device.memory_bandwidth_gbps * 1e9 * self.devices
        return nbytes / (bandwidth * self.efficiency.decode_bandwidth)

    def prefill_seconds(self, prompt_tokens: int) -> float:
        """One prompt's prefill, alone on the replica (the first token's logits included)."""
        return self.batch_prefill_seconds(prompt_tokens, 1)

    def batch_prefill_seconds(self, prompt_tokens: float, prompts: int) -> float:
        """`prompts` prompts of `prompt_tokens` each, prefilled in one engine step (weights read once)."""
        shape = self.shape
        flops = prompts * (
            prompt_tokens * shape.body_flops_per_token()
            + shape.head_flops_per_token()
            + shape.attention_flops(1, prompt_tokens * prompt_tokens / 2)
        )
        step = max(self._compute_seconds(flops), self._memory_seconds(self.fit.weights))
        return step + self.efficiency.step_overhead_seconds + self._sync_seconds()

    def decode_step_seconds(self, batch: float, context_tokens: float) -> float:
        """One continuous-batching step: a token for each of `batch` running sequences that hold
        `context_tokens` of KV cache in total."""
        if batch <= 0:
            return 0.0
        shape = self.shape
        nbytes = self.fit.weights + self.fit.kv_per_token * context_tokens
        flops = batch * (shape.body_flops_per_token() + shape.head_flops_per_token()) + shape.attention_flops(
            1, context_tokens
        )
        step = max(self._memory_seconds(nbytes), self._compute_seconds(flops))
        return step + self._fixed_seconds(batch)

    def _fixed_seconds(self, batch: float) -> float:
        factors = self.efficiency
        return factors.step_overhead_seconds + batch * factors.sequence_overhead_seconds + self._sync_seconds()

    def decode_seconds(self, batch: int, prompt_tokens: float, output_tokens: int) -> float:
        """Every decode step of `batch` sequences from a `prompt_tokens` context to `output_tokens` more (the
        first output token comes from the prefill): the exact sum of the steps, each the larger of its memory
        and compute time, both linear in the context."""
        steps = max(0, output_tokens - 1)
        if steps == 0 or batch <= 0:
            return 0.0
        shape = self.shape
        # memory time = m0 + m1 * t and compute time = c0 + c1 * t at step t (context prompt + t per sequence)
        m0 = self._memory_seconds(self.fit.weights + self.fit.kv_per_token * batch * prompt_tokens)
        m1 = self._memory_seconds(self.fit.kv_per_token * batch)
        per_token = shape.body_flops_per_token() + shape.head_flops_per_token()
        c0 = self._compute_seconds(batch * per_token + shape.attention_flops(1, batch * prompt_tokens))
        c1 = self._compute_seconds(shape.attention_flops(1, batch))
        return _sum_of_larger(m0, m1, c0, c1, steps) + steps * self._fixed_seconds(batch)

    def concurrency_limit(self, context_tokens_per_sequence: float) -> int:
        """Sequences the replica runs at once when each holds this much KV cache on average: the engine's
        max_num_seqs, or fewer where the cache runs out (Neuron: the compiled batch, whatever the lengths)."""
        if self.device.kind == "neuron":
            return self.max_num_seqs
        by_memory = int(self.kv_capacity_tokens // max(1.0, context_tokens_per_sequence))
        return max(1, min(self.configured_max_num_seqs, by_memory))


def replica_performance(
    shape: ModelShape,
    device_facts: Device,
    precision: Precision,
    tensor_parallel: int,
    max_model_len: int,
    max_num_seqs: int,
    factors: Efficiency | None = None,
) -> ReplicaPerformance:
    """The performance model of one replica over `tensor_parallel` devices; ReplicaDoesNotFit (with the
    memory figures) when the weights and one full-length KV cache (Neuron: every batch slot's) do not fit."""
    if tensor_parallel < 1 or max_model_len < 1 or max_num_seqs < 1:
        raise ValueError("tensor_parallel, max_model_len and max_num_seqs must be positive")
    fit = memory_fit(shape, device_facts, precision, tensor_parallel, max_model_len, max_num_seqs)
    if not fit.fits:
        raise ReplicaDoesNotFit(fit)
    capacity = fit.kv_capacity_tokens
    full_length = max_num_seqs if device_facts.kind == "neuron" else min(max_num_seqs, capacity // max_model_len)
    return ReplicaPerformance(
        shape=shape,
        device=device_facts,
        precision=precision,
        devices=tensor_parallel,
        max_model_len=max_model_len,
        max_num_seqs=max(1, full_length),
        configured_max_num_seqs=max_num_seqs,
        kv_capacity_tokens=capacity,
        fit=fit,
        efficiency=factors or efficiency(device_facts.kind),
    )


def _sum_of_larger(a0: float, a1: float, b0: float, b1: float, steps: int) -> float:
    """sum over t in [0, steps) of max(a0 + a1 t, b0 + b1 t), split where the two lines cross."""

    def line(c0: float, c1: float, start: int, stop: int) -> float:
        count = stop - start
        return c0 * count + c1 * (start + stop - 1) * count / 2 if count > 0 else 0.0

    if a1 == b1:
        return line(max(a0, b0), a1, 0, steps)
    cross = (b0 - a0) / (a1 - b1)  # where the lines meet
    split = min(steps, max(0, math.ceil(cross)))
    first, second = ((b0, b1), (a0, a1)) if a1 > b1 else ((a0, a1), (b0, b1))  # larger before / after
    return line(*first, 0, split) + line(*second, split, steps)


def output_tokens_per_second(perf: ReplicaPerformance, batch: int, context_tokens_per_sequence: float) -> float:
    """Decode throughput of a replica running `batch` sequences of that average context."""
    step = perf.decode_step_seconds(batch, batch * context_tokens_per_sequence)
    return batch / step if step > 0 else math.inf
