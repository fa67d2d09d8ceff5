"""A GCP training node has nic0 plus one gVNIC per GPU NIC of its machine type (the GPU NIC counts of the
GCP catalog: 4 on a3-highgpu-8g, 8 on a3-megagpu-8g), each on a different subnet (its own VPC), as
Google's A3 blueprints lay them out; with fewer, GPU-to-GPU traffic gets a fraction of the bandwidth."""

from __future__ import annotations

from infra.catalog.gcp import UnknownMachineType, machine_type
from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.gcp_training import INSTANCE, is_training

NAME = "gcp-training-nodes-have-every-gpu-nic"


def check(resource: Resource) -> list[str]:
    name, nics = resource.get("machineType"), resource.get("networkInterfaces")
    if not is_training(resource) or not isinstance(name, str) or not isinstance(nics, list):
        return []
    try:
        wanted = machine_type(name).gpu_nics
    except UnknownMachineType:
        return []
    if len(nics) < wanted + 1:
        return [
            f"{name} has {wanted} GPU NICs but the instance declares {len(nics)} network interfaces; declare nic0 "
            f"plus {wanted} more, each on the subnet of its own GPU VPC (as in Google's A3 blueprints)"
        ]
    findings = []
    subnets = [n.get("subnetwork") for n in nics if isinstance(n, dict)]
    known = [s for s in subnets if isinstance(s, str) and not is_unknown(s)]
    if len(set(known)) < len(known):
        findings.append("two network interfaces share a subnet; every GPU NIC needs the subnet of its own VPC")
    slow = [
        i
        for i, n in enumerate(nics)
        if isinstance(n, dict) and n.get("nicType") not in ("GVNIC", None) and not is_unknown(n.get("nicType"))
    ]
    unset = [i for i, n in enumerate(nics) if isinstance(n, dict) and n.get("nicType") is None]
    if slow or unset:
        findings.append(
            f"networkInterfaces[{(slow or unset)[0]}].nicType is not GVNIC; set nicType GVNIC on every "
            "interface (A3 GPU NICs need gVNIC)"
        )
    return findings


RULE = ResourceRule(
    NAME,
    "GCP training nodes have nic0 plus one gVNIC per GPU NIC, each on its own subnet.",
    "mandatory",
    (INSTANCE,),
    check,
)
