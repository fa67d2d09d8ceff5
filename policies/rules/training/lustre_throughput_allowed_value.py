"""FSx for Lustre per-unit storage throughput is a value its deployment type offers (facts in
infra.training.aws.lustre)."""

from __future__ import annotations

from infra.training.aws.lustre import throughput_problem
from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.aws import LUSTRE

NAME = "lustre-throughput-allowed-value"


def check(resource: Resource) -> list[str]:
    # AWS's default deployment type is SCRATCH_1 (pulumi-aws docs for deploymentType).
    deployment, per_unit = resource.get("deploymentType", "SCRATCH_1"), resource.get("perUnitStorageThroughput")
    if is_unknown(deployment) or is_unknown(per_unit):
        return []
    if isinstance(per_unit, float) and per_unit.is_integer():
        per_unit = int(per_unit)
    problem = throughput_problem(deployment, per_unit)
    return [f"perUnitStorageThroughput: {problem}"] if problem else []


RULE = ResourceRule(
    NAME, "FSx for Lustre perUnitStorageThroughput is allowed for its deploymentType.", "mandatory", (LUSTRE,), check
)
