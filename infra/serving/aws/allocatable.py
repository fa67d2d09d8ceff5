"""What a node of an EKS pool leaves for pods, and whether a pod's requests fit it (pure): the serving config's
schedulability check (checks.py) and promote's Job sizing (infra/ops/promotion/sizing.py) both read it.

Allocatable resources are approximated from the catalog (vCPUs, memory) minus a system reserve, as the
EKS-optimised AMI sets it up, plus what the pool's DaemonSets take:
- CPU: kube-reserved by the AMI's formula (node_room.kube_reserved_cpu) plus DAEMONSET_CPU;
- memory: kube-reserved 255 MiB + 11 MiB per pod at MAX_PODS, the kubelet's hard eviction threshold
  (memory.available < 100Mi) and DAEMONSET_MEMORY_MIB;
- disk: the pool's root volume (`diskGib`) less the kubelet's hard eviction threshold (nodefs.available <
  10%) and IMAGE_RESERVE_GIB for the OS and container images (the conversion images are 10-20 GB each).
The real figures depend on the AMI release, max-pods and the DaemonSets running; these are estimates on
the safe side, not measurements.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from infra.catalog.aws import instance_type, known_instance_types
from infra.serving.fit import artefact_volume_gib
from infra.serving.node_room import EVICTION_MEMORY_MIB, Resources, fits, kube_reserved_cpu
from infra.serving.servers import PROFILES
from infra.serving.spec import ModelSpec

GIB = 1024**3
MAX_PODS = 110  # the largest max-pods the AMI sets without prefix delegation on these sizes
DAEMONSET_CPU = 0.25  # aws-node, kube-proxy, the Pod Identity agent, the device plugin
DAEMONSET_MEMORY_MIB = 512
EVICTION_DISK_FRACTION = 0.10  # kubelet evictionHard nodefs.available
IMAGE_RESERVE_GIB = 40  # OS, kubelet and the container images on the root volume


def replica(model: ModelSpec) -> Resources:
    """What one replica of a model server asks of a node (its container's requests; the local copy of its artefact
    for a server that fetches it to disk)."""
    disk = artefact_volume_gib(model) if PROFILES[model.accelerator].fetch_to_disk else 0
    return Resources(model.cpu, model.memory_gib, disk, model.accelerators_per_replica)


def allocatable(name: str, disk_gib: int) -> Resources:
    """What a node of type `name` with a `disk_gib` root volume leaves for pods (estimate, see module doc)."""
    it = instance_type(name)
    reserved_mib = 255 + 11 * MAX_PODS + EVICTION_MEMORY_MIB + DAEMONSET_MEMORY_MIB
    return Resources(
        cpu=it.vcpus - kube_reserved_cpu(it.vcpus) - DAEMONSET_CPU,
        memory_gib=(it.memory_mib - reserved_mib) / 1024,
        disk_gib=usable_disk(disk_gib),
    )


def usable_disk(disk_gib: int) -> float:
    return disk_gib * (1 - EVICTION_DISK_FRACTION) - IMAGE_RESERVE_GIB


def disk_needed(need: Resources) -> int:
    """The smallest root volume (diskGib) whose usable part holds `need.disk_gib`."""
    return math.ceil((need.disk_gib + IMAGE_RESERVE_GIB) / (1 - EVICTION_DISK_FRACTION))


def holds(name: str, need: Resources) -> bool:
    """Whether a node of type `name` holds `need` in devices, CPU and memory (disk is the pool's, checked apart)."""
    return fits(allocatable(name, 0), instance_type(name).accelerator_count, need)


def larger_type(instance_types: Sequence[str], need: Resources) -> str | None:
    """The smallest catalog type with the pool's accelerator (same model) that holds `need`."""
    models = {instance_type(t).accelerator_model for t in instance_types}
    candidates = [instance_type(n) for n in known_instance_types()]
    same = [it for it in candidates if it.accelerator_model in models and holds(it.name, need)]
    return min(same, key=lambda it: (it.memory_mib, it.vcpus, it.name)).name if same else None
