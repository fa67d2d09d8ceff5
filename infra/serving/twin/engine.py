"""The serving twin's event loop: one model's replicas, autoscalers and nodes under a trace (pure; docs/simulate.md).

Events, in time order (a heap; requests come from the trace between them, each routed as it arrives; a replica
takes its share of those between two events in one call, Replica.run):

- **Requests** go to a ready, non-stopping replica: chosen at random behind a ClusterIP Service (kube-proxy's
  iptables mode picks a backend at random), or, behind the front door's InferencePool, by the endpoint picker's
  default scorers (Inference Extension v1.0.2): every replica seen as it is at the request's arrival, a queue
  score (1 for the shortest waiting queue, 0 for the longest, linear between; 1 for all when equal) plus a KV
  score (1 - KV-cache use), the highest total taken, ties at random. Its prefix-cache scorer is left out: the
  twin's requests carry lengths, not prompts. With no replica, the request is refused.
- **The gateway's per-key limits** (a front door in front): before routing, each request takes its key (the
  callers in turn) and is refused with 429 once that key's one-minute window (windows fixed on the minute, as
  Envoy's global rate limiter counts) has reached its requests or its tokens; a request's tokens (prompt and
  output) count when it arrives, where the gateway adds them when its response ends: within a window the
  same sum, at a window's edge a request's tokens fall in the window it arrived in.
- **Scrapes** (Prometheus, every scrape interval) record each replica's waiting, running and KV-cache figures.
- **The HPA** (every 15 s) evaluates each trigger's query over the scraped samples, takes the largest
  recommendation, then stabilisation and policies (hpa.py); **KEDA** (every pollingInterval) scales between
  zero and one (keda.py).
- **The Deployment** adds pods (pending until a node has room) or removes them: pending and starting ones first,
  then the newest ready one, which stops taking requests, runs its preStop and ends (drain below).
- **The cluster autoscaler** (every scan interval) launches nodes for pending pods (the cheapest slot per hour
  first, within each group's max) and removes nodes that have held no pod for scale-down-unneeded-time (not
  within scale-down-delay-after-add of a launch, never below a group's min). A node running a replica is
  never removed: its accelerator is fully requested.
- **Start-up**: node Ready, then image pull (once per node), weight load and engine start, then Ready at the
  next readiness probe.
- **Drain**: the replica takes no new requests; with a preStop that waits until vLLM is idle, it ends when idle
  (checked every 2 s after the preStop's sleep) or at the grace period, whichever is first; without, at the
  end of the sleep. Requests still held then are killed. A Spot reclaim does the same with the two-minute notice
  as the deadline, and the Deployment replaces the pod.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import cast

from infra.serving.twin.hpa import SYNC_SECONDS, Hpa
from infra.serving.twin.keda import WEEK_SECONDS, activation, left_to_right
from infra.serving.twin.replica import Replica, Tally
from infra.serving.twin.settings import Limits, NodeGroup, Twin

SAMPLE_SECONDS = 60.0  # the time series' resolution (the picture)
LIMIT_WINDOW_SECONDS = 60.0
PRESTOP_POLL_SECONDS = 2.0


class Limiter:
    """The gateway's per-key limits over fixed one-minute windows (Limits)."""

    def __init__(self, limits: Limits):
        self.callers = limits.callers
        self.requests, self.tokens = limits.budget()
        self.window = -1
        self.counts = [(0, 0)] * limits.callers
        self.next = 0

    def admit(self, t: float, prompt: int, output: int) -> bool:
        window = int(t // LIMIT_WINDOW_SECONDS)
        if window != self.window:
            self.window, self.counts = window, [(0, 0)] * self.callers
        key = self.next
        self.next = (key + 1) % self.callers
        requests, tokens = self.counts[key]
        if (self.requests is not None and requests >= self.requests) or (
            self.tokens is not None and tokens >= self.tokens
        ):
            return False
        self.counts[key] = (requests + 1, tokens + prompt + output)
        return True


@dataclass
class Node:
    id: int
    group: NodeGroup
    launched: float
    ready: bool = False
    pods: int = 0
    has_image: bool = False
    empty_since: float = 0.0
    gone: float | None = None
    reclaimed: bool = False


@dataclass
class Pod:
    id: int
    created: float
    node: Node | None = None
    replica: Replica | None = None
    state: str = "pending"  # pending, starting, ready, stopping, gone
    ready_at: float = math.inf
    samples: deque[tuple[float, float, float, float]] = field(default_factory=deque)


@dataclass
class Outcome:
    twin: Twin
    tally: Tally
    seconds: float
    series: list[tuple[float, int, int, int]]  # (t, desired replicas, ready replicas, nodes)
    node_seconds: dict[str, float]  # by instance type
    cost: float | None  # USD over the trace, None when a type has no price
    scale_changes: int  # times the HPA or KEDA changed the replicas
    direction_changes: int  # times it reversed direction (flapping)
    nodes_launched: int  # over the run, the nodes at the start included
    reclaims: int  # Spot interruptions


class Simulation:
    def __init__(self, twin: Twin, seed: int = 0):
        self.twin = twin
        self.rng = random.Random(seed ^ 0x5EED)
        self.tally = Tally()
        self.events: list[tuple[float, int, str, object]] = []
        self.serial = 0
        self.nodes: list[Node] = []
        self.pods: list[Pod] = []
        self.ready: list[Pod] = []
        self.routes: list[Replica] = []  # the ready pods' replicas, in the same order (the router's list)
        self.held: deque[tuple[float, int, int]] = deque()  # requests the front door holds while none serves
        self.desired = 0
        scaled = twin.scaled
        self.hpa = Hpa(scaled.hpa_min, scaled.max_replicas, scaled.behavior)
        self.last_active = 0.0
        self.last_launch = -math.inf
        self.series: list[tuple[float, int, int, int]] = []
        self.changes: list[int] = []
        perf = twin.perf
        self.steps: dict[int, list[float]] = {}  # the replicas' caches of step and prefill times (replica.py)
        self.prefills: dict[int, float] = {}
        self.limit = perf.max_num_seqs if perf.device.kind == "neuron" else perf.configured_max_num_seqs
        self.kv_capacity = float(
            perf.kv_capacity_tokens if perf.device.kind != "neuron" else perf.max_num_seqs * perf.max_model_len
        )

    # -- events ---------------------------------------------------------------------------------------------
    def at(self, time: float, kind: str, payload: object = None) -> None:
        self.serial += 1
        heapq.heappush(self.events, (time, self.serial, kind, payload))

    def run(self, trace: Iterable[tuple[float, int, int]], seconds: float) -> Outcome:
        twin = self.twin
        self._start()
        for kind, period in (
            ("scrape", twin.scrape_seconds),
            ("hpa", SYNC_SECONDS),
            ("keda", twin.scaled.polling_seconds),
            ("scan", twin.autoscaler.scan_seconds),
            ("sample", SAMPLE_SECONDS),
        ):
            self.at(period, kind, period)
        events, routes, rng, tally = self.events, self.routes, self.rng.random, self.tally
        picker = twin.routing == "picker"
        limiter = Limiter(twin.limits) if twin.limits is not None else None
        hold = twin.hold
        # Each request is routed as it arrives, but a replica takes its share of the requests between two events
        # in one call (Replica.run): only events change the routes or look at a replica, and replicas share
        # nothing but sums (the tally) and caches, so this is the same as handing each request over at once.
        next_event = events[0][0]
        shares: list[list[tuple[float, int, int]]] = [[] for _ in routes]
        arrived = 0
        for request in trace:
            t = request[0]
            if t > seconds:
                break
            if t >= next_event:
                self._hand_over(shares)
                while next_event <= t:
                    self._handle(heapq.heappop(events))
                    next_event = events[0][0]
                shares = [[] for _ in routes]
            arrived += 1
            if limiter is not None and not limiter.admit(t, request[1], request[2]):
                tally.limited += 1
                tally.unserved_tokens += request[2]
            elif shares and picker:
                routes[self._pick(t)].run((request,))  # the picker sees each replica at this request's arrival
            elif shares:
                shares[int(rng() * len(shares))].append(request)
            elif hold is not None and len(self.held) < hold.max_requests:
                self.held.append(request)  # the picker holds it until a replica serves or its hold ends
                tally.held += 1
            else:
                tally.refused += 1
                tally.unserved_tokens += request[2]
        self._hand_over(shares)
        tally.arrived += arrived
        while events and events[0][0] <= seconds:
            self._handle(heapq.heappop(events))
        return self._finish(seconds)

    def _pick(self, now: float) -> int:
        """The endpoint picker's choice among the routes at `now`: queue score plus KV score, best total."""
        seen = []
        for replica in self.routes:
            replica.advance(now)
            waiting, _, kv = replica.metrics(now)
            seen.append((waiting, kv))
        shortest = min(w for w, _ in seen)
        spread = max(w for w, _ in seen) - shortest
        scores = [(1.0 - (w - shortest) / spread if spread else 1.0) + (1.0 - kv) for w, kv in seen]
        best = max(scores)
        ties = [i for i, score in enumerate(scores) if score == best]
        return ties[0] if len(ties) == 1 else ties[int(self.rng.random() * len(ties))]

    def _hand_over(self, shares: list[list[tuple[float, int, int]]]) -> None:
        for replica, share in zip(self.routes, shares, strict=True):
            if share:
                replica.run(share)

    def _handle(self, event: tuple[float, int, str, object]) -> None:
        now, _, kind, payload = event
        if kind in ("scrape", "hpa", "keda", "scan", "sample"):
            getattr(self, "_" + kind)(now)
            self.at(now + float(payload), kind, payload)  # type: ignore[arg-type]
        else:
            getattr(self, "_" + kind)(now, payload)

    # -- start, pods and nodes ------------------------------------------------------------------------------
    def _start(self) -> None:
        twin = self.twin
        for group in twin.node_groups:
            for _ in range(group.desired):
                node = self._launch(group, 0.0)
                node.ready, node.has_image = True, True
        self.desired = twin.initial_replicas if twin.initial_replicas is not None else twin.scaled.hpa_min
        for _ in range(self.desired):  # the fleet as it runs: its minimum ready, on nodes that hold it
            pod = self._new_pod(0.0)
            if not self._bind(pod, 0.0, warm=True):
                spare = next((g for g in self._cheapest_groups() if self._size(g) < g.max_size), None)
                if spare is None:
                    continue  # stays pending: no group can hold it
                node = self._launch(spare, 0.0)
                node.ready, node.has_image = True, True
                self._bind(pod, 0.0, warm=True)
            self._make_ready(0.0, pod)

    def _cheapest_groups(self) -> list[NodeGroup]:
        """The groups whose nodes hold a replica: Spot first (the priority expander's order, ahead of the on-demand
        fallbacks), then the cheapest replica slot (what least-waste picks here)."""
        fitting = [g for g in self.twin.node_groups if g.pods_per_node > 0]
        return sorted(fitting, key=lambda g: (not g.spot, (g.price_per_hour or math.inf) / g.pods_per_node, g.name))

    def _size(self, group: NodeGroup) -> int:
        return sum(1 for n in self.nodes if n.group is group and n.gone is None)

    def _launch(self, group: NodeGroup, now: float) -> Node:
        node = Node(len(self.nodes), group, now, empty_since=now)
        self.nodes.append(node)
        if group.spot and self.twin.spot_interruptions_per_node_hour > 0:
            self.at(now + self.rng.expovariate(self.twin.spot_interruptions_per_node_hour / 3600), "reclaim", node)
        return node

    def _new_pod(self, now: float) -> Pod:
        pod = Pod(len(self.pods), now)
        self.pods.append(pod)
        return pod

    def _bind(self, pod: Pod, now: float, warm: bool = False) -> bool:
        for node in self.nodes:
            if node.ready and node.gone is None and not node.reclaimed and node.pods < node.group.pods_per_node:
                node.pods += 1
                pod.node, pod.state = node, "starting"
                if not warm:
                    pull = 0.0 if node.has_image else self.twin.image_pull_seconds
                    node.has_image = True
                    up = pull + node.group.pod_start_seconds
                    period = self.twin.readiness_period_seconds
                    self.at(now + math.ceil(up / period) * period, "make_ready", pod)
                return True
        return False

    def _make_ready(self, now: float, pod: object) -> None:
        assert isinstance(pod, Pod)
        if pod.state != "starting":
            return
        twin = self.twin
        pod.state, pod.ready_at = "ready", now
        pod.replica = Replica(
            twin.perf.decode_step_seconds, twin.perf.prefill_seconds, self.limit, self.kv_capacity,
            twin.timeout_seconds, (twin.ttft_slo_seconds, twin.tpot_slo_seconds), self.tally, now, self.steps,
            self.prefills,
        )  # fmt: skip
        self.ready.append(pod)
        self.routes.append(pod.replica)
        self._expire(now)
        if self.held:  # the first replica to serve takes what the front door held, in arrival order
            pod.replica.run(list(self.held))
            self.held.clear()

    def _expire(self, now: float) -> None:
        """Requests held past the hold are answered 503 (Retry-After): refused."""
        hold, held, tally = self.twin.hold, self.held, self.tally
        while held and (hold is None or held[0][0] + hold.seconds <= now):
            _, _, out = held.popleft()
            tally.refused += 1
            tally.held_out += 1
            tally.unserved_tokens += out

    def _live(self) -> list[Pod]:
        return [p for p in self.pods if p.state in ("pending", "starting", "ready")]

    def _scale_to(self, now: float, replicas: int) -> None:
        if replicas == self.desired:
            return
        self.changes.append(replicas - self.desired)
        self.desired = replicas
        self._reconcile(now)

    def _reconcile(self, now: float) -> None:
        live = self._live()
        for _ in range(self.desired - len(live)):
            pod = self._new_pod(now)
            self._bind(pod, now)
        if len(live) > self.desired:
            order = {"pending": 0, "starting": 1, "ready": 2}
            victims = sorted(live, key=lambda p: (order[p.state], -p.ready_at, -p.id))[: len(live) - self.desired]
            for pod in victims:
                self._stop(now, pod, self.twin.drain.grace_seconds)

    def _release(self, pod: Pod, now: float) -> None:
        if pod.node is not None:
            pod.node.pods -= 1
            if pod.node.pods == 0:
                pod.node.empty_since = now
        pod.state = "gone"

    def _stop(self, now: float, pod: Pod, deadline_seconds: float) -> None:
        if pod.state in ("pending", "starting"):
            self._release(pod, now)
            return
        if pod.state != "ready":
            return
        pod.state = "stopping"
        self.routes.pop(self.ready.index(pod))
        self.ready.remove(pod)
        drain = self.twin.drain
        deadline = now + deadline_seconds
        if drain.waits_for_idle:
            self.at(min(deadline, now + drain.prestop_sleep_seconds), "drain_check", (pod, deadline))
        else:
            self.at(min(deadline, now + drain.prestop_sleep_seconds), "end_pod", pod)

    def _drain_check(self, now: float, payload: object) -> None:
        pod, deadline = cast(tuple[Pod, float], payload)
        if pod.state != "stopping" or pod.replica is None:
            return
        pod.replica.advance(now)
        if not pod.replica.in_flight or now >= deadline:
            self._end_pod(now, pod)
        else:
            self.at(min(deadline, now + PRESTOP_POLL_SECONDS), "drain_check", (pod, deadline))

    def _end_pod(self, now: float, pod: object) -> None:
        assert isinstance(pod, Pod)
        if pod.state != "stopping":
            return
        assert pod.replica is not None
        pod.replica.advance(now)
        pod.replica.kill()
        self._release(pod, now)

    def _node_ready(self, now: float, node: object) -> None:
        assert isinstance(node, Node)
        if node.gone is not None:
            return
        node.ready, node.empty_since = True, now
        for pod in self.pods:
            if pod.state == "pending":
                self._bind(pod, now)

    def _reclaim(self, now: float, node: object) -> None:
        assert isinstance(node, Node)
        if node.gone is not None:
            return
        node.reclaimed = True
        notice = self.twin.spot_notice_seconds
        for pod in list(self.pods):
            if pod.node is node and pod.state in ("pending", "starting", "ready"):
                self._stop(now, pod, min(notice, self.twin.drain.grace_seconds))
        self.at(now + notice, "node_gone", node)
        self._reconcile(now)  # the Deployment replaces the evicted pods

    def _node_gone(self, now: float, node: object) -> None:
        assert isinstance(node, Node)
        for pod in self.pods:
            if pod.node is node and pod.state == "stopping":
                self._end_pod(now, pod)
        if node.gone is None:  # the autoscaler may have removed it first, once its pods had drained
            node.gone = now

    # -- periodic -------------------------------------------------------------------------------------------
    def _scrape(self, now: float) -> None:
        keep = max((t.query.window_seconds for t in self.twin.scaled.triggers), default=60.0)
        for pod in self.pods:
            if pod.state in ("ready", "stopping") and pod.replica is not None:
                pod.replica.advance(now)
                waiting, running, kv = pod.replica.metrics(now)
                pod.samples.append((now, waiting, running, kv))
                while pod.samples[0][0] <= now - keep:
                    pod.samples.popleft()

    def _values(self, now: float) -> list[float]:
        values = []
        for trigger in self.twin.scaled.triggers:
            query = trigger.query
            if query.series in ("held", "schedule"):  # the front door's queue, or a cron window's ask
                self._expire(now)
                clock = (self.twin.week_start_seconds + now) % WEEK_SECONDS
                values.append(float(len(self.held)) if query.series == "held" else query.scheduled(clock))
                continue
            index = {"waiting": 1, "running": 2, "kv": 3}[query.series]
            averages = []
            for pod in self.pods:
                if pod.state in ("ready", "stopping"):
                    recent = [s[index] for s in pod.samples if s[0] > now - query.window_seconds]
                    if recent:
                        averages.append(left_to_right(recent) / len(recent))
            values.append(query.value(averages))
        return values

    def _hpa(self, now: float) -> None:
        if self.desired == 0:
            return  # the HPA does not act on a target scaled to zero
        values = self._values(now)
        ready = len(self.ready)
        wanted = max(t.replicas(self.desired, ready, v) for t, v in zip(self.twin.scaled.triggers, values, strict=True))
        self._scale_to(now, self.hpa.decide(now, self.desired, wanted))

    def _keda(self, now: float) -> None:
        replicas, self.last_active = activation(
            self.twin.scaled, now, self.desired, self._values(now), self.last_active
        )
        if replicas is not None:
            self._scale_to(now, replicas)

    def _scan(self, now: float) -> None:
        scaler = self.twin.autoscaler
        pending = sum(1 for p in self.pods if p.state == "pending")
        upcoming = sum(n.group.pods_per_node - n.pods for n in self.nodes if not n.ready and n.gone is None)
        short = pending - upcoming
        if short > 0:
            for group in self._cheapest_groups():
                add = min(math.ceil(short / group.pods_per_node), group.max_size - self._size(group))
                for _ in range(max(0, add)):
                    node = self._launch(group, now)
                    self.at(now + group.ready_seconds, "node_ready", node)
                    self.last_launch = now
                    short -= group.pods_per_node
                if short <= 0:
                    break
        if now - self.last_launch < scaler.delay_after_add_seconds:
            return
        for node in self.nodes:
            if (
                node.gone is None
                and node.ready
                and node.pods == 0
                and now - node.empty_since >= scaler.unneeded_seconds
            ):
                if self._size(node.group) > node.group.min_size:
                    node.gone = now

    def _sample(self, now: float) -> None:
        nodes = sum(1 for n in self.nodes if n.gone is None)
        self.series.append((now, self.desired, len(self.ready), nodes))

    # -- the end --------------------------------------------------------------------------------------------
    def _finish(self, seconds: float) -> Outcome:
        self._expire(math.inf)  # what is still held when the trace ends is never served
        for pod in self.pods:
            if pod.replica is not None and pod.state in ("ready", "stopping"):
                pod.replica.advance(math.inf)  # every request held finishes or times out: all are accounted
        node_seconds: dict[str, float] = {}
        cost: float | None = 0.0
        for node in self.nodes:
            held = (node.gone if node.gone is not None else seconds) - node.launched
            node_seconds[node.group.instance_type] = node_seconds.get(node.group.instance_type, 0.0) + held
            price = node.group.price_per_hour
            cost = None if cost is None or price is None else cost + held / 3600 * price
        flips = sum(1 for a, b in zip(self.changes, self.changes[1:], strict=False) if (a > 0) != (b > 0))
        reclaims = sum(1 for n in self.nodes if n.reclaimed)
        return Outcome(
            self.twin, self.tally, seconds, self.series, node_seconds, cost, len(self.changes), flips, len(self.nodes),
            reclaims,
        )  # fmt: skip


def simulate(twin: Twin, trace: Iterable[tuple[float, int, int]], seconds: float, seed: int = 0) -> Outcome:
    """Run `trace` (requests up to `seconds`) through the twin; the same inputs give the same outcome."""
    return Simulation(twin, seed).run(trace, seconds)
