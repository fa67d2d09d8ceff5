"""What a node leaves for pods, the parts both clouds share (pure): a pod's requests and the kubelet's CPU
reservation, which the EKS-optimised AMI and GKE compute by the same tiers (EKS: the AMI's bootstrap;
GKE: "Plan node sizes", Memory and CPU reservations, cloud.google.com/kubernetes-engine/docs/concepts/
plan-node-sizes, read 2026-12-02): 6% of the first core, 1% of the second, 0.5% of the third and fourth,
0.25% of every core above four. Each cloud's module adds its memory and disk reservations."""

from __future__ import annotations

from dataclasses import dataclass

EVICTION_MEMORY_MIB = 100  # kubelet evictionHard memory.available, on both clouds


@dataclass(frozen=True)
class Resources:
    """What a pod asks of one node, or what a node leaves for pods."""

    cpu: float  # cores
    memory_gib: float
    disk_gib: float
    devices: int = 0  # accelerators (GPUs or Neuron devices) on one node


def tiered_share(amount: float, tiers: tuple[tuple[float, float], ...], rest_share: float) -> float:
    """What a reservation by tiers takes of `amount`: each (size, share) tier in turn, `rest_share` of what is left."""
    reserved, left = 0.0, amount
    for size, share in tiers:
        used = min(left, size)
        reserved, left = reserved + used * share, left - used
    return reserved + left * rest_share


def kube_reserved_cpu(vcpus: int) -> float:
    """The kubelet's reserved CPU on a node of `vcpus`, in cores."""
    return tiered_share(vcpus, ((1, 0.06), (1, 0.01), (2, 0.005)), 0.0025)


def fits(room: Resources, devices: int, need: Resources) -> bool:
    """Whether a node leaving `room` with `devices` accelerators holds `need` (disk apart: it is the pool's)."""
    return devices >= need.devices and room.cpu >= need.cpu and room.memory_gib >= need.memory_gib
