"""Model servers that scale to zero are held and woken: a KEDA ScaledObject that may take a model server to zero
replicas (minReplicaCount 0, KEDA's default when unset, or idleReplicaCount 0) needs

- an endpoint picker that holds the requests while no replica serves (the inferencepool chart's picker with the
  flowControl feature gate), or they fail at once: the router answers an error, clients give up, and nothing
  counts them (vllm-project/production-stack#1003);
- a trigger on what it holds (inference_extension_flow_control_queue_size), since the engines' own metrics
  vanish with the last pod: without it the model never comes back;
- a cooldownPeriod (KEDA's default 300 s) no shorter than the replica's start-up from zero (the Deployment's
  mlinfra.io/startup-budget, the slowest type's), or the pool goes before it could come back and flaps. A
  Deployment without that annotation cannot be judged, which is itself a finding.

Mandatory: each gap loses requests or leaves a model down at the first request after a quiet night.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.core.shapes import dict_at
from infra.serving.servers import HELD_METRIC
from infra.serving.startup import (
    KEDA_DEFAULT_COOLDOWN_SECONDS,
    STARTUP_ANNOTATION,
    from_annotation,
    slowest,
    whole_minutes,
)
from policies.model import Finding, Resource, Stack, StackRule, is_unknown
from policies.readers.aws import as_list
from policies.readers.pickers import pickers
from policies.readers.workloads import SCALED_OBJECT, WORKLOADS, metadata, pod_labels, scale_target, spec, workload_key

NAME = "models-at-zero-are-held-and-woken"


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or is_unknown(value):
        return None
    return int(value)


def reaches_zero(scaler: Resource) -> bool:
    body = spec(scaler)
    low = _count(body.get("minReplicaCount", 0))
    return low == 0 or _count(body.get("idleReplicaCount")) == 0


def _wakes_on_held(scaler: Resource) -> bool:
    for trigger in as_list(spec(scaler).get("triggers")):
        query = dict_at(dict_at(trigger).get("metadata")).get("query")
        if isinstance(query, str) and HELD_METRIC in query:
            return True
    return False


def _cooldown_problem(scaler: Resource, workload: Resource) -> str | None:
    value = dict_at(metadata(workload).get("annotations")).get(STARTUP_ANNOTATION)
    if value is None or is_unknown(value):
        return (
            f"its target has no {STARTUP_ANNOTATION} annotation, so its cooldown cannot be judged against the "
            "replica's start-up from zero; declare it (mlinfra writes it from the plan)"
        )
    try:
        budgets = from_annotation(str(value))
    except ValueError as error:
        return str(error)
    slow = slowest(budgets)
    assert slow is not None  # from_annotation refuses an empty budget
    start = slow.from_zero_seconds
    cooldown = _count(spec(scaler).get("cooldownPeriod", KEDA_DEFAULT_COOLDOWN_SECONDS))
    if cooldown is None or cooldown >= start:
        return None
    return (
        f"cooldownPeriod {cooldown} s is shorter than the replica's start-up from zero ({start:.0f} s on "
        f"{slow.instance_type}): the pool would go before it could come back; set at least {whole_minutes(start)}"
    )


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    workloads = {key: w for w in stack.of_type(*WORKLOADS) if (key := workload_key(w)) is not None}
    found_pickers = pickers(stack)
    findings = []
    for scaler in stack.of_type(SCALED_OBJECT):
        if is_unknown(scaler.get("spec")) or not reaches_zero(scaler):
            continue
        key = scale_target(scaler)
        workload = workloads.get(key) if key else None
        if key is None or workload is None:
            continue  # a target outside the preview: nothing to hold or judge
        where = f"ScaledObject {scaler.label} scales {key[0]} {key[1]}/{key[2]} to zero, but"
        labels = pod_labels(workload)
        holding = [p for p in found_pickers if p.selects(labels)]
        if not any(p.holds for p in holding):
            findings.append(
                Finding(
                    scaler.urn,
                    f"{where} no endpoint picker holds its requests while no replica serves (an InferencePool over "
                    "its pods whose picker enables the flowControl feature gate): they fail at once and nothing "
                    "counts them; set scaleToZero (mlinfra routes the model through such a picker)",
                )
            )
        if not _wakes_on_held(scaler):
            findings.append(
                Finding(
                    scaler.urn,
                    f"{where} none of its triggers reads the requests held for it ({HELD_METRIC}): the engines' "
                    "metrics vanish with the last pod, so it would never wake",
                )
            )
        problem = _cooldown_problem(scaler, workload)
        if problem:
            findings.append(Finding(scaler.urn, f"{where} {problem}"))
    return findings


RULE = StackRule(
    NAME,
    "Model servers that scale to zero have their requests held by the endpoint picker, a trigger that wakes them on "
    "those requests, and a cooldown no shorter than their start-up from zero.",
    "mandatory",
    check,
)
