"""Karpenter node pools have limits: without them an autoscaler bug or a flood of pending pods buys
accelerators without bound."""

from __future__ import annotations

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.aws import KARPENTER_NODE_POOL

NAME = "node-pools-have-limits"


def check(resource: Resource) -> list[str]:
    spec = resource.get("spec")
    if is_unknown(spec):
        return []
    limits = spec.get("limits") if isinstance(spec, dict) else None
    if isinstance(limits, dict) and limits:
        return []
    return [
        "spec.limits is not set, so the pool may launch nodes without bound; set limits such as cpu, "
        "nvidia.com/gpu or aws.amazon.com/neuron"
    ]


RULE = ResourceRule(NAME, "Karpenter node pools set spec.limits.", "mandatory", (KARPENTER_NODE_POOL,), check)
