"""Autoscalers bound their replicas: a KEDA ScaledObject without maxReplicaCount may run 100 replicas
(KEDA's default), each holding accelerators, and without minReplicaCount it scales to zero (requests
then wait minutes for a cold start). Mandatory: the upper bound is a cost bound."""

from __future__ import annotations

from typing import Any

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.workloads import AUTOSCALERS, SCALED_OBJECT, spec

NAME = "autoscalers-have-replica-bounds"
_KEDA_DEFAULT_MAX = 100


def check(resource: Resource) -> list[str]:
    body = resource.get("spec")
    if is_unknown(body):
        return []
    body = spec(resource)
    if resource.type == SCALED_OBJECT:
        low, high = "minReplicaCount", "maxReplicaCount"
        problems = []
        if high not in body:
            problems.append(
                f"spec.{high} is not set, so KEDA may run up to {_KEDA_DEFAULT_MAX} replicas (its default), "
                "each holding accelerators; set maxReplicaCount to what the node pools can hold"
            )
        if low not in body:
            problems.append(
                f"spec.{low} is not set, so KEDA scales to zero (its default) and requests wait for a cold "
                "start; set minReplicaCount: 1 or more for a warm replica, or 0 deliberately"
            )
    else:
        low, high = "minReplicas", "maxReplicas"
        problems = [] if high in body else ["spec.maxReplicas is not set; set it to what the node pools can hold"]
    problems.extend(_order(body, low, high))
    return problems


def _order(body: dict, low: str, high: str) -> list[str]:
    lo, hi = _count(body.get(low)), _count(body.get(high))
    if lo is None or hi is None:
        return []
    if hi < 1:
        return [f"spec.{high} is {hi}, so nothing can serve; set it to 1 or more"]
    if lo > hi:
        return [f"spec.{low} {lo} is above spec.{high} {hi}; set {low} at most {high}"]
    return []


def _count(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if float(value).is_integer() else value


RULE = ResourceRule(
    NAME, "KEDA ScaledObjects and HPAs set minimum and maximum replicas (min <= max).", "mandatory", AUTOSCALERS, check
)
