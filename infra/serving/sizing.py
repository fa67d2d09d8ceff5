"""Which hardware, precision and how many replicas serve a model under a traffic and a latency target, on which
cloud, at what cost (pure; `python -m infra size`, docs/sizing.md).

Every serving type of both clouds (infra/catalog/accelerators.py) at every asked precision and every
tensor-parallel degree its devices allow is one candidate. A candidate is refused, with the reason, when its
device cannot serve the precision, the model's heads do not split over the shards, the replica does not fit
the devices or the host, or no replica count up to the limit meets the SLO under the offered load (the
queueing model, infra/serving/queueing.py). The others get the fewest replicas meeting the SLO (p95 is never
worse with more replicas, so the search bisects), the nodes to hold them and the cost, ranked by $/hour.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from infra.catalog.accelerators import Device, Precision, ServingOffer, serving_offers
from infra.serving.families import FAMILIES
from infra.serving.fit import host_memory_gib
from infra.serving.model_shape import ModelShape
from infra.serving.performance import ReplicaDoesNotFit, ReplicaPerformance, replica_performance
from infra.serving.queueing import LoadPrediction, Traffic, predict
from infra.serving.variants import serving_refusal

TENSOR_PARALLEL = (1, 2, 4, 8)
HOST_MEMORY_SHARE = 0.9  # of a node's memory, for replicas (the rest: OS, kubelet, daemonsets)


@dataclass(frozen=True)
class Slo:
    ttft_p95_seconds: float
    tpot_p95_seconds: float

    def met_by(self, prediction: LoadPrediction) -> bool:
        return (
            prediction.feasible
            and prediction.ttft_p95_seconds <= self.ttft_p95_seconds
            and prediction.tpot_p95_seconds <= self.tpot_p95_seconds
        )


@dataclass(frozen=True)
class Request:
    shape: ModelShape
    traffic: Traffic
    slo: Slo
    precisions: tuple[Precision, ...]
    max_model_len: int
    max_num_seqs: int | None = None  # None: the engine's default of the device kind (8 on Neuron, 256 on GPUs)
    min_replicas: int = 2
    max_replicas: int = 64
    clouds: tuple[str, ...] = ("aws", "gcp")
    # With no precision asked for: each device's 16-bit default only (bf16; fp16 where there is no bf16).
    sixteen_bit_default: bool = False

    def precisions_for(self, device: Device) -> tuple[Precision, ...]:
        if not self.sixteen_bit_default:
            return self.precisions
        wanted = "bf16" if "bf16" in device.compute_formats else "fp16"
        return tuple(p for p in self.precisions if p.name == wanted)


@dataclass(frozen=True)
class Option:
    offer: ServingOffer
    precision: Precision
    tensor_parallel: int
    replicas: int
    nodes: int
    prediction: LoadPrediction

    @property
    def cost_per_hour(self) -> float:
        return self.nodes * (self.offer.price_per_hour or math.inf)

    def cost_per_million_output_tokens(self, traffic: Traffic) -> float:
        tokens_per_hour = traffic.rate_per_second * traffic.output.mean * 3600
        return self.cost_per_hour / tokens_per_hour * 1e6

    @property
    def tokens_per_second_per_replica(self) -> float:
        return self.prediction.output_tokens_per_second


@dataclass(frozen=True)
class Refusal:
    offer: ServingOffer
    precision: Precision
    tensor_parallel: int | None
    reason: str


@dataclass(frozen=True)
class Plan:
    options: tuple[Option, ...]  # ranked: cheapest first
    refused: tuple[Refusal, ...]

    @property
    def cheapest(self) -> Option | None:
        return self.options[0] if self.options else None


def _degrees(offer: ServingOffer) -> list[int]:
    return [tp for tp in TENSOR_PARALLEL if tp <= offer.devices]


# The engine's default batch per device kind, as the serving families set it.
DEFAULT_MAX_NUM_SEQS = {("neuron" if f.neuron else "gpu"): f.default_max_num_seqs for f in FAMILIES.values()}


def _replica(request: Request, device: Device, precision: Precision, tp: int) -> ReplicaPerformance | str:
    seqs = request.max_num_seqs or DEFAULT_MAX_NUM_SEQS[device.kind]
    try:
        return replica_performance(request.shape, device, precision, tp, request.max_model_len, seqs)
    except ReplicaDoesNotFit as refused:
        return f"does not fit: {refused}"


def fewest_replicas(perf: ReplicaPerformance, request: Request) -> tuple[int, LoadPrediction] | str:
    """The fewest replicas (from min_replicas) that meet the SLO, or why none up to max_replicas does."""
    low, high = request.min_replicas, request.max_replicas
    best = predict(perf, request.traffic, high)
    if not request.slo.met_by(best):
        return _why_not(best, request)
    while low < high:
        middle = (low + high) // 2
        if request.slo.met_by(predict(perf, request.traffic, middle)):
            high = middle
        else:
            low = middle + 1
    return high, predict(perf, request.traffic, high)


def _why_not(prediction: LoadPrediction, request: Request) -> str:
    at = f"at {prediction.replicas} replicas"
    if not prediction.feasible:
        return f"saturated {at}: {prediction.saturated}"
    slo, parts = request.slo, []
    if prediction.ttft_p95_seconds > slo.ttft_p95_seconds:
        parts.append(f"p95 TTFT {prediction.ttft_p95_seconds * 1000:.0f} ms > {slo.ttft_p95_seconds * 1000:.0f} ms")
    if prediction.tpot_p95_seconds > slo.tpot_p95_seconds:
        parts.append(f"p95 TPOT {prediction.tpot_p95_seconds * 1000:.1f} ms > {slo.tpot_p95_seconds * 1000:.1f} ms")
    return f"misses the SLO {at}: {', '.join(parts)}"


def _nodes(offer: ServingOffer, perf: ReplicaPerformance, replicas: int) -> int | str:
    host_need = host_memory_gib(offer.device.kind, perf.fit.weights)
    by_host = int(offer.memory_gib * HOST_MEMORY_SHARE // host_need)
    per_node = min(offer.devices // perf.devices, by_host)
    if per_node < 1:
        return (
            f"a replica needs about {host_need} GiB of host memory while loading; the node has {offer.memory_gib:g} GiB"
        )
    return math.ceil(replicas / per_node)


_Memo = dict[tuple[str, str, int], tuple[ReplicaPerformance | str, tuple[int, LoadPrediction] | str | None]]


def _candidate(request: Request, offer: ServingOffer, precision: Precision, tp: int, memo: _Memo) -> Option | Refusal:
    unserved = serving_refusal(offer.device, precision.name)
    if unserved:  # the config would refuse the variant (kernel capability, or no such variant on the device)
        return Refusal(offer, precision, tp, unserved)
    shards = tp * offer.device.engine_shards
    if request.shape.heads % shards:
        return Refusal(offer, precision, tp, f"{request.shape.heads} attention heads do not split over {shards} shards")
    key = (offer.device.name, precision.name, tp)  # the same device at the same setup, whatever the host
    if key not in memo:
        perf = _replica(request, offer.device, precision, tp)
        memo[key] = (perf, None if isinstance(perf, str) else fewest_replicas(perf, request))
    perf, found = memo[key]
    if isinstance(perf, str):
        return Refusal(offer, precision, tp, perf)
    assert found is not None
    if isinstance(found, str):
        return Refusal(offer, precision, tp, found)
    replicas, prediction = found
    nodes = _nodes(offer, perf, replicas)
    if isinstance(nodes, str):
        return Refusal(offer, precision, tp, nodes)
    return Option(offer, precision, tp, replicas, nodes, prediction)


def plan(request: Request, offers: Iterable[ServingOffer] | None = None) -> Plan:
    options: list[Option] = []
    refused: list[Refusal] = []
    memo: _Memo = {}
    for offer in offers if offers is not None else serving_offers():
        if offer.cloud not in request.clouds:
            continue
        if offer.price_per_hour is None:
            refused.append(Refusal(offer, request.precisions[0], None, "no sourced price"))
            continue
        for precision in request.precisions_for(offer.device):
            why = offer.device.unsupported(precision)
            if why:
                refused.append(Refusal(offer, precision, None, why))
                continue
            for tp in _degrees(offer):
                found = _candidate(request, offer, precision, tp, memo)
                (options if isinstance(found, Option) else refused).append(found)  # type: ignore[arg-type]
    options.sort(key=lambda o: (o.cost_per_hour, o.prediction.ttft_p95_seconds, o.offer.label))
    return Plan(tuple(_cheapest_per_setup(options)), tuple(refused))


def _cheapest_per_setup(options: Sequence[Option]) -> list[Option]:
    """One option per (cloud, type, precision): the cheapest degree (ties: the lower p95 TTFT)."""
    seen: set[tuple[str, str, str]] = set()
    kept = []
    for option in options:
        key = (option.offer.cloud, option.offer.instance_type, option.precision.name)
        if key not in seen:
            seen.add(key)
            kept.append(option)
    return kept
