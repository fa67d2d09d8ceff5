"""The accelerator pool families a serving stack can declare, on both clouds, in one table (pure).

A family is a node pool's kind of accelerator: which cloud, which device(s) of the accelerator catalog its
types carry, the device plugin's extended resource and the taint that keeps other pods off, the artefact
variants its model server loads, the engine's default batch, and on AWS the EKS AMI type and the label the
cluster autoscaler reads to know GPU nodes. Everything that used to branch on "inf2" or "g5" reads it here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Cloud = Literal["aws", "gcp"]
NVIDIA_GPU = "nvidia.com/gpu"
NEURON = "aws.amazon.com/neuron"
# EKS-optimised Amazon Linux 2023 images with the accelerator's drivers (EKS user guide, "Use EKS-optimized
# accelerated AMIs for GPU instances": AL2023 x86_64 NVIDIA lists g4dn, g5, g6, g6e; the Neuron variant inf2).
AMI_NVIDIA = "AL2023_x86_64_NVIDIA"
AMI_NEURON = "AL2023_x86_64_NEURON"


@dataclass(frozen=True)
class ServingFamily:
    name: str  # the pool key in the config and the node label value: "g5", "l4", ...
    cloud: Cloud
    devices: tuple[str, ...]  # device names of infra/catalog/data/accelerators.json the pool's types carry
    resource: str  # extended resource a replica requests
    variants: tuple[str, ...]  # artefact variants its server loads, the first by default
    variant_reason: str  # why other variants are refused
    default_max_num_seqs: int
    ami_type: str | None = None  # EKS managed node group AMI type (AWS)
    gpu_label: str | None = None  # k8s.amazonaws.com/accelerator value for the autoscaler's AWS provider

    @property
    def taint_key(self) -> str:
        return self.resource

    @property
    def neuron(self) -> bool:
        return self.resource == NEURON

    @property
    def default_variant(self) -> str:
        return self.variants[0]


def _gpu(name: str, cloud: Cloud, devices: tuple[str, ...], gpu_label: str | None = None) -> ServingFamily:
    return ServingFamily(
        name,
        cloud,
        devices,
        NVIDIA_GPU,
        ("cuda",),
        f"the {name} server is vLLM on CUDA, which loads cuda artefacts",
        256,
        AMI_NVIDIA if cloud == "aws" else None,
        gpu_label,
    )


FAMILIES: dict[str, ServingFamily] = {
    family.name: family
    for family in (
        ServingFamily(
            "inf2",
            "aws",
            ("Inferentia2",),
            NEURON,
            ("neuron",),
            "inf2 runs Neuron-compiled artefacts only",
            8,
            AMI_NEURON,
        ),
        _gpu("g5", "aws", ("A10G",), "nvidia-a10g"),
        _gpu("g4dn", "aws", ("T4",), "nvidia-tesla-t4"),
        _gpu("g6", "aws", ("L4",), "nvidia-l4"),
        _gpu("g6e", "aws", ("L40S",), "nvidia-l40s"),
        _gpu("l4", "gcp", ("L4",)),
        _gpu("a100", "gcp", ("A100-40GB", "A100-80GB")),
    )
}
AWS_FAMILIES = tuple(name for name, family in FAMILIES.items() if family.cloud == "aws")
GCP_FAMILIES = tuple(name for name, family in FAMILIES.items() if family.cloud == "gcp")


def family(name: str) -> ServingFamily:
    return FAMILIES[name]
