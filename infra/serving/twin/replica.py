"""One model server replica under continuous batching, advanced analytically between events (pure).

The replica is the performance model of infra/serving/performance.py run as a machine:

- A request is **admitted** while fewer than the replica's concurrency limit (max_num_seqs after the KV-cache
  bound) are prefilling or decoding; otherwise it **waits** (vllm:num_requests_waiting) until a sequence finishes.
- Prefills run one after another, first come first served, each taking prefill_seconds(prompt); the decode
  batch stalls while one runs (a prefill is an engine step of its own). The prefill's end is the first token.
- Decoding is a step clock: every running sequence gains one token per step and a step takes
  decode_step_seconds(N, KV tokens held) for the N running. Between two events (a prefill's end, a sequence's
  last token, an arrival, a scrape) N is constant, so the clock is advanced in one multiplication, never a
  step at a time: a request costs a few heap operations, whatever its length.
- A request that waited longer than the client timeout before admission is counted as timed out, not served.

Everything is deterministic: the replica holds no randomness.
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from heapq import heappop, heappush


@dataclass
class Tally:
    """Where every request ended, and the latency histograms (1 ms bins for TTFT, 0.1 ms for TPOT)."""

    arrived: int = 0
    completed: int = 0
    timed_out: int = 0
    refused: int = 0  # no ready replica to route to (and none held), or held past the front door's hold
    held: int = 0  # held at the front door while no replica served (each also ends as one of the others)
    held_out: int = 0  # of the refused: held the whole hold, then answered 503 with Retry-After
    limited: int = 0  # refused by the gateway with 429: the caller's key was past its limit for the minute
    killed: int = 0  # stopped mid-request: a replica ended (drain, spot reclaim) before its last token
    output_tokens: int = 0  # of completed requests
    unserved_tokens: int = 0  # output tokens of the requests not completed (timed out, refused, limited, killed)
    over_slo: int = 0  # completed with TTFT or TPOT over its target
    ttft_ms: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))
    tpot_ms10: defaultdict[int, int] = field(default_factory=lambda: defaultdict(int))

    @property
    def accounted(self) -> int:
        return self.completed + self.timed_out + self.refused + self.limited + self.killed


class Replica:
    """The engine state of one replica; `advance(t)` runs it to time t."""

    __slots__ = (
        "step",
        "prefill",
        "limit",
        "timeout",
        "slo",
        "tally",
        "t",
        "clock",
        "running",
        "heap",
        "joins",
        "waiting",
        "prefill_free",
        "kv_prompt",
        "kv_start",
        "kv_capacity",
        "steps",
        "prefills",
    )

    def __init__(
        self,
        step: Callable[[int, float], float],
        prefill: Callable[[int], float],
        limit: int,
        kv_capacity: float,
        timeout: float,
        slo: tuple[float, float],
        tally: Tally,
        now: float,
        steps: dict[int, list[float]] | None = None,
        prefills: dict[int, float] | None = None,
    ):
        self.step, self.prefill, self.limit, self.kv_capacity = step, prefill, limit, kv_capacity
        # step times by running, then by KV held rounded down to 64 tokens (0.0: not computed yet), shared between
        # replicas of one model: a small-int key (running) and a list index, no hashing of a large int per step
        self.steps = {} if steps is None else steps
        self.prefills = {} if prefills is None else prefills  # prefill times by prompt tokens, shared likewise
        self.timeout, self.slo, self.tally = timeout, slo, tally
        self.t = now
        self.clock = 0.0  # decode steps run so far
        self.running = 0
        self.heap: list[tuple[float, float, float, int, int]] = []  # (last step, first token, arrival, out, prompt)
        self.joins: deque[tuple[float, float, float, int, int]] = deque()  # (start, end, arrival, out, prompt)
        self.waiting: deque[tuple[float, int, int]] = deque()  # (arrival, prompt, out)
        self.prefill_free = now
        self.kv_prompt = 0  # prompt tokens of the running sequences
        self.kv_start = 0.0  # sum of the clock at which each running sequence joined

    @property
    def in_flight(self) -> int:
        return self.running + len(self.joins) + len(self.waiting)

    def kv_tokens(self) -> float:
        if not self.running:
            return 0.0  # exactly: the running sums would leave a rounding residue
        return self.kv_prompt + self.running * self.clock - self.kv_start

    def metrics(self, now: float) -> tuple[float, float, float]:
        """(waiting, running, KV cache use) as vLLM exports them at `now` (after advance(now))."""
        prefilling = 1 if self.joins and self.joins[0][0] <= now else 0
        waiting = len(self.waiting) + len(self.joins) - prefilling
        return float(waiting), float(self.running + prefilling), min(1.0, self.kv_tokens() / self.kv_capacity)

    def arrive(self, now: float, prompt: int, out: int) -> None:
        self.run(((now, prompt, out),))

    def advance(self, to: float) -> None:
        """Run the replica from its time to `to`: prefills, joins, decode steps and completions in order."""
        if to > self.t:
            self.run((), to)

    def run(self, requests: Sequence[tuple[float, int, int]], to: float = -math.inf) -> None:
        """Take `requests` (arrival, prompt, out; in order of arrival), each once the engine has run to its
        arrival, then run on to `to`.

        This is the twin's hot path (a few passes per request, millions of requests a day), so the engine's state
        is held in locals for the whole call and written back once, and a completion's tally is written out here;
        the rare paths (a one-token request, admitting from the waiting queue) call helpers. A request at a time
        (arrive) and a run of them give the same results: the state moves through the same steps and the
        floating-point operations are the same, in the same order."""
        joins, heap, waiting, steps, prefills = self.joins, self.heap, self.waiting, self.steps, self.prefills
        limit, tally = self.limit, self.tally
        ttft_slo, tpot_slo = self.slo
        ttft_hist, tpot_hist = tally.ttft_ms, tally.tpot_ms10
        t, clock, running = self.t, self.clock, self.running
        kv_prompt, kv_start, prefill_free = self.kv_prompt, self.kv_start, self.prefill_free
        completed = tokens = over = 0
        count, i = len(requests), 0
        while True:
            target = requests[i][0] if i < count else to
            if target > t:  # run the engine to `target`: the loop ends where advance's ended, at its breaks
                while True:
                    if joins and joins[0][0] <= t:  # a prefill is running: decoding stalls until it ends
                        start, end, arrival, out, prompt = joins[0]
                        if end > target:
                            t = target
                            break
                        joins.popleft()
                        t = end
                        if out <= 1:
                            self._finish(t, t, arrival, out)
                            prefill_free = self._fill(t, running, prefill_free)
                            continue
                        heappush(heap, (clock + out - 1, t, arrival, out, prompt))
                        running += 1
                        kv_prompt += prompt
                        kv_start += clock
                        continue
                    horizon = joins[0][0] if joins and joins[0][0] < target else target
                    if not running:
                        t = horizon
                        if horizon >= target:
                            break
                        continue
                    # the step time for this batch and the KV it holds (rounded down to 64 tokens), cached
                    kv = int(kv_prompt + running * clock - kv_start) >> 6
                    row = steps.get(running)
                    step = row[kv] if row is not None and 0 <= kv < len(row) else 0.0
                    if step == 0.0:
                        step = self._step(running, kv)
                    last = heap[0][0]
                    at = t + (last - clock) * step
                    if at <= horizon:  # the sequence with the fewest tokens left ends first
                        clock = last
                        t = at
                        _, first, arrival, out, prompt = heappop(heap)
                        running -= 1
                        kv_prompt -= prompt
                        kv_start -= last - out + 1
                        ttft, tpot = first - arrival, (t - first) / (out - 1)  # out > 1: one-token requests end above
                        completed += 1
                        tokens += out
                        if ttft > ttft_slo or tpot > tpot_slo:
                            over += 1
                        ttft_hist[int(ttft * 1000)] += 1
                        tpot_hist[int(tpot * 10000)] += 1
                        if waiting:
                            prefill_free = self._fill(t, running, prefill_free)
                        continue
                    clock = clock + (horizon - t) / step
                    t = horizon
                    if t >= target:
                        break
            if i == count:
                break
            now, prompt, out = requests[i]
            i += 1
            if running + len(joins) < limit:
                start = now if now > prefill_free else prefill_free
                seconds = prefills.get(prompt)
                prefill_free = start + (self._prefill(prompt) if seconds is None else seconds)
                joins.append((start, prefill_free, now, out, prompt))
            else:
                waiting.append((now, prompt, out))
        self.t, self.clock, self.running = t, clock, running
        self.kv_prompt, self.kv_start, self.prefill_free = kv_prompt, kv_start, prefill_free
        tally.completed += completed
        tally.output_tokens += tokens
        tally.over_slo += over

    def _step(self, running: int, kv: int) -> float:
        """The step time of `running` sequences holding `kv` x 64 tokens, computed once (run()'s cache miss)."""
        seconds = self.step(running, kv * 64.0)
        if kv >= 0:
            row = self.steps.setdefault(running, [])
            if kv >= len(row):
                row.extend([0.0] * (kv + 1 - len(row)))
            row[kv] = seconds
        return seconds

    def _prefill(self, prompt: int) -> float:
        seconds = self.prefills.get(prompt)
        if seconds is None:
            seconds = self.prefills[prompt] = self.prefill(prompt)
        return seconds

    def _finish(self, now: float, first: float, arrival: float, out: int) -> None:
        """A completion's tally (run() writes this out for its common case; a one-token request comes here)."""
        tally = self.tally
        ttft = first - arrival
        tpot = (now - first) / (out - 1) if out > 1 else 0.0
        tally.completed += 1
        tally.output_tokens += out
        if ttft > self.slo[0] or tpot > self.slo[1]:
            tally.over_slo += 1
        tally.ttft_ms[int(ttft * 1000)] += 1
        tally.tpot_ms10[int(tpot * 10000)] += 1

    def _fill(self, now: float, running: int, prefill_free: float) -> float:
        """Admit waiting requests into free slots (`running` decoding); those that waited past the timeout are
        dropped. Returns when the prefills queued end (run()'s prefill_free)."""
        waiting, joins, limit = self.waiting, self.joins, self.limit
        while waiting and running + len(joins) < limit:
            arrival, prompt, out = waiting.popleft()
            if now - arrival > self.timeout:
                self.tally.timed_out += 1
                self.tally.unserved_tokens += out
                continue
            start = now if now > prefill_free else prefill_free
            prefill_free = start + self._prefill(prompt)
            joins.append((start, prefill_free, arrival, out, prompt))
        return prefill_free

    def kill(self) -> int:
        """The replica stops now: every request it still holds is lost. Returns how many."""
        lost = self.in_flight
        self.tally.killed += lost
        self.tally.unserved_tokens += (
            sum(entry[3] for entry in self.heap) + sum(j[3] for j in self.joins) + sum(w[2] for w in self.waiting)
        )
        self.heap.clear()
        self.joins.clear()
        self.waiting.clear()
        self.running = 0
        self.kv_prompt = 0
        self.kv_start = 0.0
        return lost

    def idle_at(self) -> float:
        """When the replica, taking no new requests, finishes what it holds (math.inf if it cannot tell
        without running: it holds sequences)."""
        return self.t if not self.in_flight else math.inf
