"""Training launch templates pass the run tags on to the instances, volumes and network interfaces
they launch (tagSpecifications): those are the resources that bill."""

from __future__ import annotations

from infra.core.tags import missing_contract_tags
from policies.model import Resource, ResourceRule
from policies.readers.aws import LAUNCH_TEMPLATE, as_list, role_of

NAME = "training-launch-templates-tag-what-they-launch"
LAUNCHED = ("instance", "volume", "network-interface")


def check(resource: Resource) -> list[str]:
    if role_of(resource) != "training":
        return []
    specs = {s.get("resourceType"): s for s in as_list(resource.get("tagSpecifications")) if isinstance(s, dict)}
    problems = []
    for kind in LAUNCHED:
        if kind not in specs:
            problems.append(
                f"tagSpecifications has no '{kind}' entry, so launched {kind}s carry no run tags; add "
                f"one with resourceType '{kind}' and the run's contract tags"
            )
            continue
        tags = specs[kind].get("tags")
        missing = missing_contract_tags("training", tags if isinstance(tags, dict) else {})
        if missing:
            problems.append(f"tagSpecifications '{kind}' lacks {', '.join(missing)}; give it the run's contract tags")
    return problems


RULE = ResourceRule(
    NAME,
    "Training launch templates tag the instances, volumes and interfaces they launch.",
    "mandatory",
    (LAUNCH_TEMPLATE,),
    check,
)
