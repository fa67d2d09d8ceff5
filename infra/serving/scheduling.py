"""How pods find their accelerator nodes on either cloud: the pool labels, the device plugins' extended
resources and the taints that keep other pods off (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from infra.serving.families import FAMILIES

Family = Literal["inf2", "g5", "g4dn", "g6", "g6e", "l4", "a100", "system"]
ACCELERATOR_LABEL = "mlinfra.io/accelerator"
POOL_LABEL = "mlinfra.io/pool"
# On the on-demand groups behind a Spot pool's groups: their nodes stand in for Spot nodes the autoscaler could not
# get (the cost report counts the pair once).
FALLBACK_LABEL = "mlinfra.io/on-demand-fallback"

# Extended resource the device plugin advertises, and the taint that keeps other pods off the nodes.
ACCELERATOR_RESOURCE = {name: f.resource for name, f in FAMILIES.items()}
TAINT_KEY = {name: f.taint_key for name, f in FAMILIES.items()}


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str = "NoSchedule"  # Kubernetes spelling

    def toleration(self) -> dict[str, str]:
        return {"key": self.key, "operator": "Exists", "effect": self.effect}


def taint(family: str) -> Taint:
    return Taint(TAINT_KEY[family], "true")
