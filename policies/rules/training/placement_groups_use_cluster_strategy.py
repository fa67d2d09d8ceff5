"""Training placement groups use the `cluster` strategy: EFA nodes need one low-latency network spine."""

from __future__ import annotations

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.aws import PLACEMENT_GROUP, role_of

NAME = "placement-groups-use-cluster-strategy"


def check(resource: Resource) -> list[str]:
    strategy = resource.get("strategy")
    if role_of(resource) != "training" or strategy == "cluster" or is_unknown(strategy):
        return []
    return [f"strategy is {strategy!r}; training nodes need strategy 'cluster' (one spine for the EFA fabric)"]


RULE = ResourceRule(NAME, "Training placement groups use strategy 'cluster'.", "mandatory", (PLACEMENT_GROUP,), check)
