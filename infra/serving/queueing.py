"""p95 time to first token and time per output token of a fleet under an offered load (pure; docs/sizing.md).

Requests arrive at random (Poisson) and spread evenly over the replicas. In one replica:

- **Decode.** Each running sequence gains one token per engine step, and a step takes
  decode_step_seconds(N, N x context) for N running sequences; prefills take their share ρ of the replica's
  time, so a sequence's time per output token is step(N) / (1 - ρ). By Little's law the mean number running
  is N = λ x output tokens x TPOT, solved for N (the least fixed point; none below the replica's concurrency
  limit means the replica is saturated: requests queue without bound).
- **Concurrency at p95.** The number running fluctuates like a Poisson count around N (arrivals are
  Poisson, service times are long): N95 = N + 1.645 sqrt(N). TPOT p95 is the step time at N95.
- **First token.** Prefills queue for the replica one after the other: an M/G/1 queue with service time
  prefill_seconds(prompt) and load ρ = λ x mean prefill time. Its waiting time's tail, approximated as
  exponential with the Pollaczek-Khinchine mean (Kingman's heavy-traffic form), gives the p95 wait;
  TTFT p95 = p95 wait + the prefill of a p95-long prompt + one decode step it shares with the batch.

Token lengths are fixed figures or distributions given by mean and p95 (a lognormal through both); their
variability enters the prefill queue (the service time's squared coefficient of variation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infra.serving.performance import ReplicaPerformance

Z95 = 1.6448536269514722  # standard normal 95th percentile


@dataclass(frozen=True)
class Lengths:
    """Token lengths of requests: mean and p95 (equal for a fixed length)."""

    mean: float
    p95: float

    def __post_init__(self) -> None:
        if self.mean <= 0 or self.p95 < self.mean:
            raise ValueError("lengths need 0 < mean <= p95")

    @classmethod
    def fixed(cls, tokens: float) -> Lengths:
        return cls(tokens, tokens)

    @property
    def scv(self) -> float:
        """Squared coefficient of variation of the lognormal through mean and p95 (0 when fixed)."""
        if self.p95 <= self.mean:
            return 0.0
        # ln p95 - ln mean = Z95 * sigma - sigma^2 / 2, the smaller root
        gap = math.log(self.p95 / self.mean)
        disc = Z95**2 - 2 * gap
        sigma = Z95 - math.sqrt(disc) if disc > 0 else Z95
        return math.expm1(sigma**2)


@dataclass(frozen=True)
class Traffic:
    rate_per_second: float  # requests per second, over the whole fleet
    prompt: Lengths
    output: Lengths

    def __post_init__(self) -> None:
        if self.rate_per_second <= 0:
            raise ValueError("the request rate must be positive")


@dataclass(frozen=True)
class LoadPrediction:
    replicas: int
    ttft_p95_seconds: float  # inf when saturated
    tpot_p95_seconds: float
    running_mean: float  # sequences running per replica
    prefill_load: float  # share of a replica's time spent in prefill
    output_tokens_per_second: float  # per replica, at the offered load
    saturated: str | None  # why the replicas cannot keep up, or None

    @property
    def feasible(self) -> bool:
        return self.saturated is None


def _tpot(perf: ReplicaPerformance, running: float, context: float, prefill_load: float) -> float:
    return perf.decode_step_seconds(running, running * context) / (1 - prefill_load)


def _running(perf: ReplicaPerformance, rate: float, output: float, context: float, load: float, limit: int) -> float:
    """The least N with N = rate x output x TPOT(N), or inf when there is none up to `limit`."""

    def excess(n: float) -> float:
        return rate * output * _tpot(perf, n, context, load) - n

    if excess(limit) > 0:
        return math.inf
    low, high = 0.0, float(limit)
    for _ in range(60):
        middle = (low + high) / 2
        if excess(middle) > 0:
            low = middle
        else:
            high = middle
    return high


def predict(perf: ReplicaPerformance, traffic: Traffic, replicas: int) -> LoadPrediction:
    """p95 TTFT and TPOT of `replicas` identical replicas sharing `traffic` evenly."""
    if replicas < 1:
        raise ValueError("replicas must be at least 1")
    rate = traffic.rate_per_second / replicas
    prompt, output = traffic.prompt, traffic.output
    context = prompt.mean + output.mean / 2  # KV each running sequence holds, on average
    limit = perf.concurrency_limit(prompt.mean + output.mean)
    prefill = perf.prefill_seconds(math.ceil(prompt.mean))
    load = rate * prefill
    tokens = rate * output.mean

    def saturated(why: str) -> LoadPrediction:
        return LoadPrediction(replicas, math.inf, math.inf, math.inf, load, tokens, why)

    if load >= 1:
        return saturated(f"prefills alone take {load:.0%} of each replica's time")
    running = _running(perf, rate, output.mean, context, load, limit)
    if math.isinf(running):
        return saturated(f"decoding needs more than the {limit} sequences a replica runs at once")
    running95 = min(float(limit), running + Z95 * math.sqrt(running))
    tpot95 = _tpot(perf, running95, context, load)
    # M/G/1 prefill queue: mean wait rho / (1 - rho) x (1 + scv) / 2 x E[S], tail taken as exponential.
    mean_wait = load / (1 - load) * (1 + prompt.scv) / 2 * prefill
    wait95 = mean_wait * math.log(20 * load) / load if load > 0.05 else 0.0
    ttft95 = (
        wait95 + perf.prefill_seconds(math.ceil(prompt.p95)) + perf.decode_step_seconds(running95, running95 * context)
    )
    return LoadPrediction(replicas, ttft95, tpot95, running, load, tokens, None)
