"""Training nodes use training instance types (infra/catalog/data/roles.json): whole EFA nodes with
eight or more accelerators."""

from __future__ import annotations

from infra.catalog.roles import role_problem
from policies.model import Resource, ResourceRule
from policies.readers.aws import FLEET, INSTANCE, LAUNCH_TEMPLATE, instance_types, role_of

NAME = "training-nodes-use-training-types"


def check(resource: Resource) -> list[str]:
    if role_of(resource) != "training":
        return []
    return [f"instance type {problem}" for t in instance_types(resource) if (problem := role_problem(t, "training"))]


RULE = ResourceRule(
    NAME,
    "Training launch templates, fleets and instances use training instance types.",
    "mandatory",
    (LAUNCH_TEMPLATE, FLEET, INSTANCE),
    check,
)
