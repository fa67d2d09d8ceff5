"""Model servers fit the devices they run on: for every model server Deployment, the weights at its precision +
the KV cache its engine needs for --max-model-len (on Neuron for every --max-num-seqs slot) + runtime overhead
fit the accelerators it requests on each device type of the node pools its nodeSelector picks, and those
devices support the precision (no fp8 on T4 or A10G, no bf16 on T4). The architecture and precision come from
the Deployment's mlinfra.io/model-architecture and mlinfra.io/precision annotations (written from the model's
config.json); a model server without them cannot be checked and is a violation too.

Mandatory: a replica that does not fit never starts (vLLM refuses, or the Neuron runtime runs out of memory),
and the autoscaler keeps buying nodes for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.catalog.accelerators import Device, UnknownAcceleratorFact, device_of, precision
from infra.core.shapes import dict_at
from infra.serving.fit import ARCHITECTURE_ANNOTATION, PRECISION_ANNOTATION, shape_from_annotation
from infra.serving.performance import memory_fit
from infra.serving.scheduling import ACCELERATOR_LABEL
from policies.model import Finding, Resource, Stack, StackRule
from policies.readers.aws import EKS_NODE_GROUP, as_list
from policies.readers.gcp import GKE_NODE_POOL, node_config
from policies.readers.workloads import (
    ACCELERATOR_RESOURCES,
    WORKLOADS,
    is_model_server,
    metadata,
    pod_spec,
    workload_key,
)

NAME = "model-servers-fit-their-devices"


def _pool_devices(stack: Stack, family: str) -> list[Device]:
    """The devices of every node pool labelled with `family` (EKS node groups, GKE node pools)."""
    found: list[Device] = []
    for group in stack.of_type(EKS_NODE_GROUP):
        if dict_at(group.get("labels")).get(ACCELERATOR_LABEL) == family:
            found += [d for t in as_list(group.get("instanceTypes")) if (d := _device("aws", t))]
    for pool in stack.of_type(GKE_NODE_POOL):
        config = dict_at(node_config(pool))
        if dict_at(config.get("labels")).get(ACCELERATOR_LABEL) == family:
            found += [d for d in [_device("gcp", config.get("machineType"))] if d]
    return list({d.name: d for d in found}.values())


def _device(cloud: str, name: Any) -> Device | None:
    if not isinstance(name, str):
        return None
    try:
        return device_of(cloud, name)
    except UnknownAcceleratorFact:
        return None  # not a serving type: serving-pools-use-serving-types says so


def _flag(args: list[Any], flag: str) -> int | None:
    for i, arg in enumerate(args[:-1]):
        if arg == flag and str(args[i + 1]).isdigit():
            return int(args[i + 1])
    return None


def _server(resource: Resource) -> tuple[int, int | None, int | None] | None:
    """(accelerators requested, --max-model-len, --max-num-seqs) of the container asking for accelerators."""
    for container in as_list(pod_spec(resource).get("containers")):
        container = dict_at(container)
        limits = dict_at(dict_at(container.get("resources")).get("limits"))
        count = next((limits[k] for k in ACCELERATOR_RESOURCES if k in limits), None)
        if count is not None and str(count).isdigit():
            args = as_list(container.get("args"))
            return int(count), _flag(args, "--max-model-len"), _flag(args, "--max-num-seqs")
    return None


def _findings(stack: Stack, workload: Resource) -> list[str]:
    annotations = dict_at(metadata(workload).get("annotations"))
    architecture = annotations.get(ARCHITECTURE_ANNOTATION)
    if not isinstance(architecture, str):
        return [
            f"has no {ARCHITECTURE_ANNOTATION} annotation, so its fit on the devices cannot be checked; set the "
            "model's modelConfig to its Hugging Face config.json (mlinfra writes the annotation from it)"
        ]
    try:
        shape = shape_from_annotation(architecture)
        chosen = precision(str(annotations.get(PRECISION_ANNOTATION, "bf16")))
    except (ValueError, UnknownAcceleratorFact) as error:
        return [str(error)]
    server = _server(workload)
    family = dict_at(pod_spec(workload).get("nodeSelector")).get(ACCELERATOR_LABEL)
    if server is None or not isinstance(family, str):
        return []  # no accelerator requested or no pool selected: nothing to fit
    count, max_model_len, max_num_seqs = server
    key = workload_key(workload)
    name = key[2] if key else "the model"
    problems = []
    for found in _pool_devices(stack, family):
        why = found.unsupported(chosen)
        if why:
            problems.append(f"cannot run at {chosen.name}: {why}")
            continue
        fit = memory_fit(
            shape,
            found,
            chosen,
            count,
            max_model_len or shape.max_position_embeddings or 4096,
            max_num_seqs or 256,
            model=name,
        )
        if not fit.fits:
            problems.append(f"does not fit its {family} nodes: {fit.explain()}")
    return problems


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    findings = []
    for workload in stack.of_type(*WORKLOADS):
        if not is_model_server(workload):
            continue
        for problem in _findings(stack, workload):
            findings.append(Finding(workload.urn, f"model server {workload.label} {problem}"))
    return findings


RULE = StackRule(
    NAME,
    "Model servers fit the devices they run on: weights + KV cache + overhead within the accelerators' memory.",
    "mandatory",
    check,
)
