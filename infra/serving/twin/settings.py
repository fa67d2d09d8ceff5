"""What the twin simulates, as data: one model's autoscaling chain and the nodes under it (pure).

`infra/tools/simulate/settings.py` reads these from a stack's offline preview; tests build them directly.
Its start-up times are each node group's start-up budget (infra/serving/startup.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.serving.performance import ReplicaPerformance
from infra.serving.twin.keda import ScaledObject

# cluster-autoscaler defaults (FAQ, "What are the parameters to CA?", cluster-autoscaler-chart 9.51.0's app
# v1.34): --scan-interval 10s, --scale-down-unneeded-time 10m, --scale-down-delay-after-add 10m,
# --scale-down-utilization-threshold 0.5.
CA_SCAN_SECONDS = 10.0
CA_UNNEEDED_SECONDS = 600.0
CA_DELAY_AFTER_ADD_SECONDS = 600.0


@dataclass(frozen=True)
class NodeGroup:
    name: str
    instance_type: str
    spot: bool
    min_size: int
    max_size: int
    desired: int  # nodes at the start
    price_per_hour: float | None  # USD list price, on demand (a spot node is billed at most this)
    pods_per_node: int  # replicas of the model one node holds
    ready_seconds: float  # launch to a Ready node
    pod_start_seconds: float  # image pull excluded: weights streamed, engine started


@dataclass(frozen=True)
class Autoscaler:
    scan_seconds: float = CA_SCAN_SECONDS
    unneeded_seconds: float = CA_UNNEEDED_SECONDS
    delay_after_add_seconds: float = CA_DELAY_AFTER_ADD_SECONDS


@dataclass(frozen=True)
class Drain:
    """How a stopping replica ends: preStop, then SIGTERM, within terminationGracePeriodSeconds."""

    grace_seconds: float
    prestop_sleep_seconds: float  # the preStop's first sleep (endpoints removed meanwhile)
    waits_for_idle: bool  # the preStop waits until vLLM runs and queues nothing


@dataclass(frozen=True)
class Limits:
    """The front door's per-key limits as they fall on this model's traffic: fixed one-minute windows (Envoy's
    global rate limiter), a request refused with 429 once its key's window has reached either count. `callers`:
    the API keys the traffic is spread over, evenly. A key's budget is shared over every model it calls, so each
    model gets the share of it that its traffic is (`share`)."""

    requests_per_minute: int | None  # None: no request limit
    tokens_per_minute: int | None = None  # None: no token limit
    callers: int = 1
    share: float = 1.0  # of each key's budget, this model's

    def budget(self) -> tuple[float | None, float | None]:
        """Requests and tokens one key may spend on this model in a window (None: not limited)."""
        return self._share_of(self.requests_per_minute), self._share_of(self.tokens_per_minute)

    def _share_of(self, per_minute: int | None) -> float | None:
        return None if per_minute is None else per_minute * self.share


@dataclass(frozen=True)
class Hold:
    """The front door's hold while no replica serves: the endpoint picker's flow-control queue (a request waits
    up to `seconds`, then 503; past `max_requests` held, 429)."""

    seconds: float
    max_requests: int


@dataclass(frozen=True)
class Twin:
    """One model of a serving stack, as deployed."""

    model: str
    perf: ReplicaPerformance
    scaled: ScaledObject
    node_groups: tuple[NodeGroup, ...]
    drain: Drain
    scrape_seconds: float
    readiness_period_seconds: float
    image_pull_seconds: float
    autoscaler: Autoscaler = Autoscaler()
    initial_replicas: int | None = None  # default: the ScaledObject's minimum (at least 1)
    ttft_slo_seconds: float = 2.0
    tpot_slo_seconds: float = 0.1
    timeout_seconds: float = 60.0  # a client gives up on a request not started within this
    spot_interruptions_per_node_hour: float = 0.0
    spot_notice_seconds: float = 120.0
    # How a request finds its replica: "random" (a ClusterIP Service: kube-proxy picks a backend at random) or
    # "picker" (the front door's InferencePool: the endpoint picker scores every ready replica on its queue and KV
    # cache at the request's arrival and takes the best).
    routing: str = "random"
    limits: Limits | None = None  # the front door's per-key limits; None: no gateway in front
    hold: Hold | None = None  # the front door's hold while the pool is empty; None: such requests are refused
    week_start_seconds: float = 0.0  # where in the week (from Monday 00:00, the schedule's zone) the trace starts
