"""A small twin for the mechanics' tests: mistral-7b on one A10G per replica, g5.xlarge nodes (no preview)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from infra.catalog.accelerators import precision, serving_offer
from infra.serving.model_shape import load_model_shape
from infra.serving.performance import replica_performance
from infra.serving.twin.hpa import Behavior, Policy, Rules
from infra.serving.twin.keda import ScaledObject, Trigger, parse_query
from infra.serving.twin.settings import Drain, NodeGroup, Twin
from tests.helpers import ROOT

WAITING = "sum(avg_over_time(vllm:num_requests_waiting{app='m'}[1m])) or vector(0)"
KV = "(avg(avg_over_time(vllm:kv_cache_usage_perc{app='m'}[1m]))) or vector(0)"
MLINFRA_BEHAVIOR = Behavior(Rules(0, (Policy("Pods", 2, 60),)), Rules(600, (Policy("Pods", 1, 120),)))


def perf(max_num_seqs: int = 256):
    offer = serving_offer("aws", "g5.xlarge")
    shape = load_model_shape(ROOT / "stacks/models/mistral-7b/config.json")
    return replica_performance(shape, offer.device, precision("bf16"), 1, 4096, max_num_seqs)


def scaled(**changes: Any) -> ScaledObject:
    base = ScaledObject(
        min_replicas=2,
        max_replicas=6,
        polling_seconds=15,
        cooldown_seconds=300,
        triggers=(
            Trigger("queue-depth", parse_query(WAITING), "AverageValue", 8.0),
            Trigger("kv-cache", parse_query(KV), "Value", 0.75),
        ),
        behavior=MLINFRA_BEHAVIOR,
    )
    return replace(base, **changes)


def group(**changes: Any) -> NodeGroup:
    base = NodeGroup("g5", "g5.xlarge", False, 1, 8, 2, 1.006, 1, 150.0, 150.0)
    return replace(base, **changes)


def twin(**changes: Any) -> Twin:
    base = Twin(
        model="m",
        perf=perf(),
        scaled=scaled(),
        node_groups=(group(),),
        drain=Drain(630.0, 15.0, True),
        scrape_seconds=15.0,
        readiness_period_seconds=10.0,
        image_pull_seconds=500.0,
    )
    return replace(base, **changes)
