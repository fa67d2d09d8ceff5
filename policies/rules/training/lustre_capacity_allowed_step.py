"""FSx for Lustre storage capacity is an allowed step of its deployment type (infra.training.aws.lustre facts)."""

from __future__ import annotations

from infra.training.aws.lustre import capacity_problem
from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.aws import LUSTRE

NAME = "lustre-capacity-allowed-step"


def check(resource: Resource) -> list[str]:
    deployment, capacity = resource.get("deploymentType", "SCRATCH_1"), resource.get("storageCapacity")
    if is_unknown(deployment) or is_unknown(capacity):
        return []
    if capacity is None:
        return ["storageCapacity is not set; set an allowed step of the deployment type"]
    if isinstance(capacity, float) and capacity.is_integer():
        capacity = int(capacity)  # protobuf carries every number as a double
    problem = capacity_problem(deployment, capacity)
    return [f"storageCapacity: {problem}"] if problem else []


RULE = ResourceRule(
    NAME, "FSx for Lustre storageCapacity is an allowed step of its deploymentType.", "mandatory", (LUSTRE,), check
)
