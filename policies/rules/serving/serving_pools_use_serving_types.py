"""Serving node pools use serving instance types (infra/catalog/data/roles.json): a p4d serving pool
pays for an interconnect inference does not use. Pools of general-purpose types (system pools) are
not this rule's business; accelerator types outside the serving list are."""

from __future__ import annotations

from infra.catalog.aws import instance_type
from infra.catalog.roles import role_problem, types_for
from policies.model import Resource, ResourceRule
from policies.readers.aws import EKS_NODE_GROUP, INSTANCE, KARPENTER_NODE_POOL, LAUNCH_TEMPLATE, instance_types, role_of

NAME = "serving-pools-use-serving-types"
_POOLS = (EKS_NODE_GROUP, KARPENTER_NODE_POOL)


def check(resource: Resource) -> list[str]:
    if resource.type not in _POOLS and role_of(resource) != "serving":
        return []
    return [f"instance type {role_problem(t, 'serving')}" for t in instance_types(resource) if _not_for_serving(t)]


def _not_for_serving(name: str) -> bool:
    if name in types_for("serving"):
        return False
    if name in types_for("training"):
        return True
    try:
        return instance_type(name).accelerator_count > 0
    except LookupError:
        return False  # not in the accelerator catalog: a general-purpose type


RULE = ResourceRule(
    NAME,
    "Serving node pools and serving instances use serving instance types.",
    "mandatory",
    (EKS_NODE_GROUP, KARPENTER_NODE_POOL, LAUNCH_TEMPLATE, INSTANCE),
    check,
)
