"""Meaning checks of a GCP serving config and its provider config (second tier): findings name the key."""

from __future__ import annotations

from infra.catalog.accelerators import Device, device, device_of
from infra.catalog.gcp import UnknownMachineType, known_machine_types, machine_type
from infra.core.errors import Problem
from infra.serving import startup
from infra.serving.checks import GATEWAY_KEY, endpoint_findings, gateway_findings, replica_bound_findings
from infra.serving.families import FAMILIES, GCP_FAMILIES
from infra.serving.fit import fit_findings
from infra.serving.gcp.allocatable import allocatable, holding_types, holds, replica
from infra.serving.gcp.config import GcpGatewaySpec, GcpModelSpec, GcpServingSpec, GkePoolSpec, secret_project
from infra.serving.variants import variant_problem

P = "mlinfra:serving."
# The GPU types (Compute Engine accelerator names) each pool takes, from the accelerator catalog.
POOL_ACCELERATOR_TYPES = {
    family: tuple(device(name).catalog_names["gcp"] for name in FAMILIES[family].devices) for family in GCP_FAMILIES
}


def pool_machine_types(family: str) -> list[str]:
    return [t for t in known_machine_types() if machine_type(t).accelerator.type in POOL_ACCELERATOR_TYPES[family]]


def gcp_serving_findings(spec: GcpServingSpec, region: str | None, project: str | None = None) -> list[Problem]:
    findings = endpoint_findings(spec.cluster.endpoint)
    if spec.gateway is not None:
        findings += _gateway_findings(spec.gateway, project)
    largest: dict[str, int] = {}
    devices: dict[str, list[Device]] = {}
    for family, pool in spec.node_pools.declared().items():
        pool_findings, largest[family] = _pool_findings(family, pool, region)
        findings += pool_findings
        devices[family] = [
            device_of("gcp", name)
            for name in pool.machine_types
            if name in known_machine_types() and machine_type(name).accelerator.type in POOL_ACCELERATOR_TYPES[family]
        ]
    for index, model in enumerate(spec.models):
        found = _model_findings(index, model, largest)
        if model.accelerator in devices:
            found += fit_findings(f"{P}models[{index}].", model, devices[model.accelerator])
        if not found and devices.get(model.accelerator):
            pool = spec.node_pools.declared()[model.accelerator]
            found += _schedulable_findings(index, model, pool)
            if not found and model.scale_to_zero is not None:
                budgets = startup.model_budgets(model, holding_types(model, pool.machine_types))
                found = startup.zero_findings(f"{P}models[{index}].", model, budgets, spec.gateway is not None)
        findings += found
    return findings


def _gateway_findings(gateway: GcpGatewaySpec, project: str | None) -> list[Problem]:
    findings = gateway_findings(gateway, "apiKeysSecret", gateway.api_keys_secret, "Secret Manager")
    for field, name in (("tlsSecret", gateway.tls_secret), ("apiKeysSecret", gateway.api_keys_secret)):
        if project is None or name is None or secret_project(name) == project:
            continue
        findings.append(
            Problem(
                f"{GATEWAY_KEY}.{field}",
                f"the secret is in project {secret_project(name)}, the stack in {project}: the gateway reads "
                f"secrets of its own project only; create it in {project} (projects/{project}/secrets/...)",
            )
        )
    return findings


def _schedulable_findings(index: int, model: GcpModelSpec, pool: GkePoolSpec) -> list[Problem]:
    """A replica's CPU and memory (with the FUSE sidecar's) against what the pool's machine type leaves for pods:
    a replica no node holds stays Pending, and GKE's autoscaler never adds a node for it."""
    (name,) = pool.machine_types
    need = replica(model)
    if holds(name, need):
        return []
    room = allocatable(name)
    bigger = [t for t in pool_machine_types(model.accelerator) if holds(t, need)]
    smallest = min(bigger, key=lambda t: (machine_type(t).memory_gib, machine_type(t).vcpus, t), default=None)
    fix = f"use {smallest} in nodePools.{model.accelerator}.machineTypes" if smallest else "no catalog type holds it"
    field, value, left, unit = (
        ("cpu", model.cpu, room.cpu, "CPU")
        if need.cpu > room.cpu
        else ("memoryGib", model.memory_gib, room.memory_gib, "GiB of memory")
    )
    return [
        Problem(
            f"{P}models[{index}].{field}",
            f"{value:g}: a replica of {model.name} asks for {need.cpu:g} CPU and {need.memory_gib:g} GiB with its "
            f"Cloud Storage FUSE sidecar; a {name} node leaves {left:.1f} {unit} for pods (GKE's reservations and "
            f"DaemonSets, estimated), so its pods would stay Pending: lower {field} or {fix}",
        )
    ]


def _pool_findings(family: str, pool: GkePoolSpec, region: str | None) -> tuple[list[Problem], int]:
    where = f"{P}nodePools.{family}."
    findings = []
    largest = 0
    for i, name in enumerate(pool.machine_types):
        try:
            mtype = machine_type(name)
        except UnknownMachineType as error:
            findings.append(Problem(f"{where}machineTypes[{i}]", str(error)))
            continue
        if mtype.accelerator.type not in POOL_ACCELERATOR_TYPES[family]:
            findings.append(
                Problem(
                    f"{where}machineTypes[{i}]",
                    f"{name} has {mtype.accelerator.model} GPUs ({mtype.accelerator.type}), not "
                    f"{' or '.join(POOL_ACCELERATOR_TYPES[family])}; the {family} pool takes: "
                    f"{', '.join(pool_machine_types(family))}",
                )
            )
            continue
        zones = mtype.zones_in(region) if region else None
        if zones == ():
            findings.append(
                Problem(
                    f"{where}machineTypes[{i}]",
                    f"{name} is not offered in {region}; regions that offer it: {', '.join(mtype.regions)}",
                )
            )
        largest = max(largest, mtype.accelerator.count)
    if pool.max_nodes < pool.min_nodes:
        findings.append(
            Problem(
                f"{where}maxNodes",
                f"{pool.max_nodes} is below minNodes ({pool.min_nodes}); use at least {pool.min_nodes}",
            )
        )
    return findings, largest


def _model_findings(index: int, model: GcpModelSpec, largest: dict[str, int]) -> list[Problem]:
    where = f"{P}models[{index}]."
    if model.accelerator not in largest:
        return [
            Problem(
                where + "accelerator",
                f"{model.accelerator} has no node pool; declare nodePools.{model.accelerator} (e.g. "
                f"{model.accelerator}: {{}} for its default machine type) or use one of: {', '.join(largest)}",
            )
        ]
    refused = variant_problem(model.artefact_variant, model.accelerator)
    if refused:  # the fit and the engine need a variant the devices run
        return [Problem(where + "variant", refused)]
    findings = replica_bound_findings(where, model)
    count = largest[model.accelerator]
    if count and model.accelerators_per_replica > count:
        findings.append(
            Problem(
                where + "acceleratorsPerReplica",
                f"{model.accelerators_per_replica} per replica, but the {model.accelerator} pool's machine type has "
                f"{count}; lower it or pick a larger machine type in nodePools.{model.accelerator}.machineTypes",
            )
        )
    return findings
