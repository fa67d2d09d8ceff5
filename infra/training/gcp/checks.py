"""Meaning checks of a GCP training config (second tier): each finding names the key and the fix."""

from __future__ import annotations

import ipaddress

from infra.catalog.gcp import UnknownMachineType, known_machine_types, machine_type
from infra.core.errors import Problem
from infra.training.checks import run_findings
from infra.training.gcp.config import GcpTrainingSpec
from infra.training.gcp.lustre import pinned_problems
from infra.training.lustre import LustreIntent, LustreSizingError
from infra.training.spec import KEY as P


def training_machine_types() -> list[str]:
    """Catalog types built for multi-node training: the ones with GPU NICs (GPUDirect-TCPX/TCPXO)."""
    return [n for n in known_machine_types() if machine_type(n).gpu_nics > 0]


def gcp_training_findings(spec: GcpTrainingSpec, region: str | None) -> list[Problem]:
    try:
        mtype = machine_type(spec.machine_type)
    except UnknownMachineType as error:
        return [Problem(P + "machineType", str(error))]
    if mtype.gpu_nics == 0:
        return [
            Problem(
                P + "machineType",
                f"{spec.machine_type} is not a training type (no GPU NICs for "
                f"GPUDirect); training takes: {', '.join(training_machine_types())}",
            )
        ]
    findings = _zone_findings(spec, region) + _network_findings(spec)
    return findings + _lustre_findings(spec) + run_findings(spec)


def chosen_zone(spec: GcpTrainingSpec, region: str) -> str | None:
    """The configured zone, or the first zone of the region the catalog lists as offering the type."""
    offered = machine_type(spec.machine_type).zones_in(region) or ()
    return spec.zone or (offered[0] if offered else None)


def _zone_findings(spec: GcpTrainingSpec, region: str | None) -> list[Problem]:
    if not region:
        return []  # gcp:region is reported by the provider checks
    mtype = machine_type(spec.machine_type)
    offered = mtype.zones_in(region)
    if spec.zone and not spec.zone.startswith(region + "-"):
        return [Problem(P + "zone", f"{spec.zone} is not a zone of gcp:region {region}; use a zone such as {region}-a")]
    if offered == ():
        return [
            Problem(
                P + "machineType",
                f"{spec.machine_type} is not offered in {region}; regions that offer it: {', '.join(mtype.regions)}",
            )
        ]
    if offered is None:
        if not spec.zone:
            return [
                Problem(
                    P + "zone",
                    f"required: the catalog does not record {spec.machine_type}'s zones in {region} "
                    f"(it knows {', '.join(mtype.regions)}); name a zone that offers it",
                )
            ]
        return []
    if spec.zone and spec.zone not in offered:
        return [
            Problem(P + "zone", f"{spec.zone} does not offer {spec.machine_type}; zones that do: {', '.join(offered)}")
        ]
    return []


def _network_findings(spec: GcpTrainingSpec) -> list[Problem]:
    ranges = {
        "network.cidr": spec.network.cidr,
        "network.gpuCidr": spec.network.gpu_cidr,
        "network.lustreCidr": spec.network.lustre_cidr,
    }
    nets = {k: ipaddress.IPv4Network(v) for k, v in ranges.items()}
    keys = list(nets)
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            if nets[a].overlaps(nets[b]):
                return [Problem(P + b, f"{ranges[b]} overlaps {a} ({ranges[a]}); the ranges must not overlap")]
    return []


def lustre_intent(spec: GcpTrainingSpec) -> LustreIntent:
    fs = spec.lustre
    return LustreIntent(
        dataset_gib=fs.dataset_gib,
        checkpoint_gib=fs.checkpoint_gib,
        checkpoint_write_seconds=fs.checkpoint_write_seconds,
        read_throughput_gbps=fs.read_throughput_gbps,
    )


def _lustre_findings(spec: GcpTrainingSpec) -> list[Problem]:
    try:
        intent = lustre_intent(spec)
    except LustreSizingError as error:
        return [Problem(P + "lustre", str(error))]
    return pinned_problems(P + "lustre.", spec.lustre.per_unit_storage_throughput, spec.lustre.capacity_gib, intent)
