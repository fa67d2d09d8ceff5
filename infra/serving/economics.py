"""What a million output tokens cost on a model server, at the throughput the performance model predicts (pure;
shown by `python -m infra cost` and the PR report next to $/hour, docs/cost.md).

A replica's throughput: the largest batch whose decode step keeps TPOT within the model's slo.tpotP95Ms (without
an slo, the engine's full batch after the KV-cache bound), each sequence holding the slo's p95 prompt plus half
of a 256-token answer; tokens/s = batch / step time. A replica's cost: its share of its node (the pool's first
type that holds a replica, replicas packed by accelerators). Steady decoding at that batch is the best case:
real traffic leaves batches partly empty, so the figure is a floor of the cost per token, stated as such.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.catalog.accelerators import UnknownAcceleratorFact, serving_offer
from infra.serving import engine
from infra.serving.fit import load_shape, slo_prompt_tokens
from infra.serving.model_shape import ModelConfigError
from infra.serving.performance import ReplicaDoesNotFit, replica_performance
from infra.serving.spec import ModelSpec

ANSWER_TOKENS = 256  # output tokens the context assumes, half of them held on average


@dataclass(frozen=True)
class ReplicaEconomics:
    model: str
    instance_type: str
    device: str
    devices: int  # per replica
    precision: str
    batch: int
    tpot_seconds: float
    tokens_per_second: float  # output tokens per second, one replica
    usd_per_hour: float  # one replica's share of its node
    basis: str

    @property
    def usd_per_million_tokens(self) -> float:
        return self.usd_per_hour / (self.tokens_per_second * 3600) * 1e6


def holds_replica(model: ModelSpec, cloud: str, instance_type: str) -> bool:
    """Whether a node of the type holds one replica: its accelerators, CPU and memory requests."""
    try:
        offer = serving_offer(cloud, instance_type)
    except UnknownAcceleratorFact:
        return False
    return (
        offer.devices >= model.accelerators_per_replica
        and offer.vcpus >= model.cpu
        and offer.memory_gib >= model.memory_gib
    )


def replica_economics(model: ModelSpec, cloud: str, instance_type: str) -> ReplicaEconomics | str:
    """The economics of one replica of `model` on `instance_type`, or why it cannot be predicted."""
    try:
        shape = load_shape(model)
        offer = serving_offer(cloud, instance_type)
    except (ModelConfigError, UnknownAcceleratorFact) as error:
        return str(error)
    if shape is None:
        return "no modelConfig: the throughput cannot be predicted"
    if offer.price_per_hour is None:
        return f"{instance_type} has no sourced price"
    try:
        perf = replica_performance(
            shape,
            offer.device,
            engine.precision_of(model),
            model.accelerators_per_replica,
            model.max_model_len,
            engine.max_num_seqs(model),
        )
    except ReplicaDoesNotFit as error:
        return f"does not fit: {error}"
    context = slo_prompt_tokens(model) + ANSWER_TOKENS / 2
    limit = perf.concurrency_limit(context + ANSWER_TOKENS / 2)

    def step(batch: int) -> float:
        return perf.decode_step_seconds(batch, batch * context)

    batch, basis = limit, "the engine's full batch"
    if model.slo is not None:
        target = model.slo.tpot_p95_ms / 1000
        fitting = [b for b in range(1, limit + 1) if step(b) <= target]
        batch = max(fitting, default=1)
        basis = f"the largest batch keeping TPOT within {model.slo.tpot_p95_ms:g} ms"
    per_node = max(1, offer.devices // model.accelerators_per_replica)
    return ReplicaEconomics(
        model=model.name,
        instance_type=instance_type,
        device=offer.device.name,
        devices=model.accelerators_per_replica,
        precision=engine.precision_of(model).name,
        batch=batch,
        tpot_seconds=step(batch),
        tokens_per_second=batch / step(batch),
        usd_per_hour=offer.price_per_hour / per_node,
        basis=basis,
    )
