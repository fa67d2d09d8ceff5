"""Training compute ends with the run: the fleet is `instant` (launched once, never replaced), deleting it
terminates its instances, and a node that powers itself off is terminated, not stopped. A `maintain` fleet
replaces the nodes the guard terminates; `terminateInstances: false` leaves them running when the stack is
destroyed; a stopped node keeps its volumes billing and can be started again outside the run."""

from __future__ import annotations

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.aws import FLEET, LAUNCH_TEMPLATE, role_of

NAME = "training-compute-ends-with-the-run"


def check(resource: Resource) -> list[str]:
    if role_of(resource) != "training":
        return []
    if resource.type == LAUNCH_TEMPLATE:
        behavior = resource.get("instanceInitiatedShutdownBehavior")
        if is_unknown(behavior) or behavior == "terminate":
            return []
        return [
            f"instanceInitiatedShutdownBehavior is {behavior or 'not set (stop)'!s}: a node that powers off at the "
            "end of its job would stop and keep billing its volumes; set it to 'terminate'"
        ]
    findings = []
    kind = resource.get("type")
    if not is_unknown(kind) and kind != "instant":
        findings.append(
            f"type is {kind or 'not set (maintain)'!s}: EC2 replaces the nodes the run guard terminates; use 'instant'"
        )
    terminate = resource.get("terminateInstances")
    if not is_unknown(terminate) and terminate is not True:
        findings.append(
            "terminateInstances is not true: destroying the stack would leave the fleet's nodes running; set it true"
        )
    return findings


RULE = ResourceRule(
    NAME,
    "Training fleets are instant, terminate their nodes when deleted, and nodes terminate on power-off.",
    "mandatory",
    (FLEET, LAUNCH_TEMPLATE),
    check,
)
