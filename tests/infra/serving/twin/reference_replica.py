"""The twin's replica as it was written before Replica.run (issue 21, the twin's speed): the reference that
tests/infra/serving/twin/test_replica_run.py holds the batched loop to, exactly. Not used by the twin."""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable

from infra.serving.twin.replica import Tally


class ReferenceReplica:
    """infra/serving/twin/replica.py's Replica before run() (a request at a time, state on the instance)."""

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
        steps: dict[int, float] | None = None,
    ):
        self.step, self.prefill, self.limit, self.kv_capacity = step, prefill, limit, kv_capacity
        # step times by (running, KV held rounded down to 64 tokens), shared between replicas of one model
        self.steps = {} if steps is None else steps
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
        if now > self.t:
            self.advance(now)
        joins = self.joins
        if self.running + len(joins) < self.limit:
            free = self.prefill_free
            start = now if now > free else free
            end = self.prefill_free = start + self.prefill(prompt)
            joins.append((start, end, now, out, prompt))
        else:
            self.waiting.append((now, prompt, out))

    def _admit(self, now: float, arrival: float, prompt: int, out: int) -> None:
        start = now if now > self.prefill_free else self.prefill_free
        end = start + self.prefill(prompt)
        self.prefill_free = end
        self.joins.append((start, end, arrival, out, prompt))

    def _finish(self, now: float, first: float, arrival: float, out: int) -> None:
        tally = self.tally
        ttft = first - arrival
        tpot = (now - first) / (out - 1) if out > 1 else 0.0
        tally.completed += 1
        tally.output_tokens += out
        if ttft > self.slo[0] or tpot > self.slo[1]:
            tally.over_slo += 1
        tally.ttft_ms[int(ttft * 1000)] += 1
        tally.tpot_ms10[int(tpot * 10000)] += 1

    def _fill(self, now: float) -> None:
        """Admit waiting requests into free slots; those that waited past the timeout are dropped."""
        waiting = self.waiting
        while waiting and self.running + len(self.joins) < self.limit:
            arrival, prompt, out = waiting.popleft()
            if now - arrival > self.timeout:
                self.tally.timed_out += 1
                self.tally.unserved_tokens += out
                continue
            self._admit(now, arrival, prompt, out)

    def advance(self, to: float) -> None:
        """Run the replica from its time to `to`: prefills, joins, decode steps and completions in order."""
        t, joins, heap, step_of, steps = self.t, self.joins, self.heap, self.step, self.steps
        if to <= t:
            return
        while True:
            if joins and joins[0][0] <= t:  # a prefill is running: decoding stalls until it ends
                start, end, arrival, out, prompt = joins[0]
                if end > to:
                    t = to
                    break
                joins.popleft()
                t = end
                if out <= 1:
                    self._finish(t, t, arrival, out)
                    self._fill(t)
                    continue
                heapq.heappush(heap, (self.clock + out - 1, t, arrival, out, prompt))
                self.running += 1
                self.kv_prompt += prompt
                self.kv_start += self.clock
                continue
            horizon = joins[0][0] if joins and joins[0][0] < to else to
            running = self.running
            if not running:
                t = horizon
                if horizon >= to:
                    break
                continue
            clock = self.clock
            kv = int(self.kv_prompt + running * clock - self.kv_start) >> 6
            step = steps.get(running << 24 | kv)
            if step is None:
                step = steps[running << 24 | kv] = step_of(running, kv * 64.0)
            last = heap[0][0]
            at = t + (last - clock) * step
            if at <= horizon:
                self.clock = last
                t = at
                _, first, arrival, out, prompt = heapq.heappop(heap)
                self.running = running - 1
                self.kv_prompt -= prompt
                self.kv_start -= last - out + 1
                self._finish(t, first, arrival, out)
                if self.waiting:
                    self._fill(t)
                continue
            self.clock = clock + (horizon - t) / step
            t = horizon
            if t >= to:
                break
        self.t = t

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
