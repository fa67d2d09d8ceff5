"""How pods find their accelerator nodes on either cloud: the pool labels, the device plugins' extended
resources and the taints that keep other pods off (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Family = Literal["inf2", "g5", "l4", "system"]
ACCELERATOR_LABEL = "mlinfra.io/accelerator"
POOL_LABEL = "mlinfra.io/pool"

# Extended resource the device plugin advertises, and the taint that keeps other pods off the nodes.
ACCELERATOR_RESOURCE = {"inf2": "aws.amazon.com/neuron", "g5": "nvidia.com/gpu", "l4": "nvidia.com/gpu"}
TAINT_KEY = {"inf2": "aws.amazon.com/neuron", "g5": "nvidia.com/gpu", "l4": "nvidia.com/gpu"}


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str = "NoSchedule"  # Kubernetes spelling

    def toleration(self) -> dict[str, str]:
        return {"key": self.key, "operator": "Exists", "effect": self.effect}


def taint(family: Family) -> Taint:
    return Taint(TAINT_KEY[family], "true")
