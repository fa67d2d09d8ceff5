"""What a node of a GKE pool leaves for pods (pure): the GCP serving config's schedulability check reads it.

GKE's documented reservations ("Plan node sizes", Memory and CPU reservations, cloud.google.com/kubernetes-
engine/docs/concepts/plan-node-sizes, read 2026-12-02): memory 25% of the first 4 GiB, 20% of the next 4, 10% of
the next 8, 6% of the next 112 and 2% above 128 GiB, plus the 100 MiB eviction threshold; CPU by the tiers both
clouds share (node_room.kube_reserved_cpu). GKE's own DaemonSets on a GPU node (kube-proxy, fluentbit, the GKE
metadata server, the NVIDIA device plugin and driver installer) take DAEMONSET_CPU and DAEMONSET_MEMORY_MIB,
estimates on the safe side. Model servers read weights through the Cloud Storage FUSE sidecar GKE injects, whose
requests count too (SIDECAR_*: the driver's documented defaults, which the pods' limit annotations leave as
they are). No local disk is asked for: the weights are read from the bucket.
"""

from __future__ import annotations

from infra.catalog.gcp import machine_type
from infra.serving.node_room import EVICTION_MEMORY_MIB, Resources, fits, kube_reserved_cpu, tiered_share
from infra.serving.spec import ModelSpec

MEMORY_TIERS = ((4, 0.25), (4, 0.20), (8, 0.10), (112, 0.06))  # (GiB, share reserved); 2% of the rest
MEMORY_REST_SHARE = 0.02
DAEMONSET_CPU = 0.3
DAEMONSET_MEMORY_MIB = 640
SIDECAR_CPU = 0.25  # gke-gcsfuse-sidecar's default CPU request
SIDECAR_MEMORY_GIB = 0.25  # and its default memory request (256Mi)


def reserved_memory_gib(memory_gib: float) -> float:
    return tiered_share(memory_gib, MEMORY_TIERS, MEMORY_REST_SHARE)


def allocatable(name: str) -> Resources:
    """What a node of machine type `name` leaves for pods (estimate, see module doc)."""
    m = machine_type(name)
    memory = m.memory_gib - reserved_memory_gib(m.memory_gib) - (EVICTION_MEMORY_MIB + DAEMONSET_MEMORY_MIB) / 1024
    return Resources(cpu=m.vcpus - kube_reserved_cpu(m.vcpus) - DAEMONSET_CPU, memory_gib=memory, disk_gib=0)


def replica(model: ModelSpec) -> Resources:
    """What one replica of a GKE model server asks of a node: its container and the FUSE sidecar."""
    return Resources(model.cpu + SIDECAR_CPU, model.memory_gib + SIDECAR_MEMORY_GIB, 0, model.accelerators_per_replica)


def holds(name: str, need: Resources) -> bool:
    return fits(allocatable(name), machine_type(name).accelerator.count, need)


def holding_types(model: ModelSpec, machine_types: list[str]) -> dict[str, float | None]:
    """The pool's machine types a replica of `model` fits, with their network bandwidth (Gbps, None where the
    catalog has none): its start-up budget's."""
    need = replica(model)
    return {m: machine_type(m).max_bandwidth_gbps for m in machine_types if holds(m, need)}
