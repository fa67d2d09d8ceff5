"""Meaning checks of a GCP serving config and its provider config (second tier): findings name the key."""

from __future__ import annotations

from infra.catalog.gcp import UnknownMachineType, known_machine_types, machine_type
from infra.core.errors import Problem
from infra.serving.checks import endpoint_findings
from infra.serving.gcp.config import GcpModelSpec, GcpServingSpec

P = "mlinfra:serving."
POOL_ACCELERATOR_MODEL = {"l4": "L4"}


def gcp_serving_findings(spec: GcpServingSpec, region: str | None) -> list[Problem]:
    findings = endpoint_findings(spec.cluster.endpoint)
    pool = spec.node_pools.l4
    where = f"{P}nodePools.l4."
    largest = 0
    for i, name in enumerate(pool.machine_types):
        try:
            mtype = machine_type(name)
        except UnknownMachineType as error:
            findings.append(Problem(f"{where}machineTypes[{i}]", str(error)))
            continue
        if mtype.accelerator.model != POOL_ACCELERATOR_MODEL["l4"]:
            l4 = [t for t in known_machine_types() if machine_type(t).accelerator.model == "L4"]
            findings.append(
                Problem(
                    f"{where}machineTypes[{i}]",
                    f"{name} has {mtype.accelerator.model} GPUs, not L4; the l4 pool takes: {', '.join(l4)}",
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
    for index, model in enumerate(spec.models):
        findings += _model_findings(index, model, largest)
    return findings


def _model_findings(index: int, model: GcpModelSpec, largest: int) -> list[Problem]:
    where = f"{P}models[{index}]."
    findings = []
    if model.artefact_variant != "cuda":
        findings.append(
            Problem(
                where + "variant",
                f"{model.artefact_variant} artefacts cannot be served on l4: the L4 "
                "server is vLLM on CUDA, which loads cuda artefacts; use cuda",
            )
        )
    if model.max_replicas < model.min_replicas:
        findings.append(
            Problem(
                where + "maxReplicas",
                f"{model.max_replicas} is below minReplicas ({model.min_replicas}); use at least {model.min_replicas}",
            )
        )
    if largest and model.accelerators_per_replica > largest:
        findings.append(
            Problem(
                where + "acceleratorsPerReplica",
                f"{model.accelerators_per_replica} per replica, but the l4 pool's machine type has "
                f"{largest}; lower it or pick a larger G2 type in nodePools.l4.machineTypes",
            )
        )
    return findings
