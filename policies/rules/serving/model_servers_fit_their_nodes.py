"""Model servers fit the nodes of their pools: every model server Deployment's pod (its containers' requests, the
largest init step, native sidecars and the Cloud Storage FUSE sidecar GKE injects) against what each type of the
node pools its nodeSelector picks leaves for pods: CPU and memory after the kubelet's and the DaemonSets'
reservations, the accelerators, and on EKS the root volume's usable disk for its ephemeral storage (the same
estimates as the config check, infra/serving/aws/allocatable.py and infra/serving/gcp/allocatable.py).

Mandatory: a pod no node holds stays Pending, the cluster autoscaler refuses to add a node for it, and
`pulumi up` waits out its timeout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.catalog.aws import UnknownInstanceType, instance_type
from infra.catalog.gcp import UnknownMachineType, machine_type
from infra.core.quantity import quantity
from infra.core.shapes import dict_at
from infra.serving.aws import allocatable as eks
from infra.serving.gcp import allocatable as gke
from infra.serving.manifests import FUSE_ANNOTATIONS
from infra.serving.node_room import Resources, fits
from infra.serving.scheduling import ACCELERATOR_LABEL
from policies.model import Finding, Resource, Stack, StackRule
from policies.readers.aws import EKS_NODE_GROUP, LAUNCH_TEMPLATE, as_list, linked_of_type
from policies.readers.gcp import GKE_NODE_POOL, node_config
from policies.readers.workloads import ACCELERATOR_RESOURCES, WORKLOADS, is_model_server, pod_spec

NAME = "model-servers-fit-their-nodes"
GIB = 1024**3
EKS_DEFAULT_DISK_GIB = 20  # a managed node group's root volume when nothing sizes it (the EKS AMIs' 20 GiB)


def _requests(container: Any) -> Resources:
    asked = dict_at(container, "resources", "requests")
    devices = next((asked[k] for k in ACCELERATOR_RESOURCES if k in asked), 0)
    return Resources(
        quantity(asked.get("cpu", 0)),
        quantity(asked.get("memory", 0)) / GIB,
        quantity(asked.get("ephemeral-storage", 0)) / GIB,
        int(quantity(devices)),
    )


def _add(a: Resources, b: Resources) -> Resources:
    return Resources(a.cpu + b.cpu, a.memory_gib + b.memory_gib, a.disk_gib + b.disk_gib, a.devices + b.devices)


def _most(a: Resources, b: Resources) -> Resources:
    return Resources(
        max(a.cpu, b.cpu), max(a.memory_gib, b.memory_gib), max(a.disk_gib, b.disk_gib), max(a.devices, b.devices)
    )


def pod_request(workload: Resource) -> Resources:
    """What the scheduler reserves for one pod: the app containers and native sidecars summed, or the largest
    regular init step with the sidecars, whichever is more (Kubernetes' effective request)."""
    pod = pod_spec(workload)
    none = Resources(0, 0, 0, 0)
    sidecars, steps = none, none
    for init in as_list(pod.get("initContainers")):
        if dict_at(init).get("restartPolicy") == "Always":
            sidecars = _add(sidecars, _requests(init))
        else:
            steps = _most(steps, _requests(init))
    apps = none
    for container in as_list(pod.get("containers")):
        apps = _add(apps, _requests(container))
    annotations = dict_at(workload.get("spec"), "template", "metadata", "annotations")
    if annotations.get("gke-gcsfuse/volumes") == FUSE_ANNOTATIONS["gke-gcsfuse/volumes"]:
        sidecars = _add(sidecars, Resources(gke.SIDECAR_CPU, gke.SIDECAR_MEMORY_GIB, 0, 0))
    return _most(_add(apps, sidecars), _add(steps, sidecars))


def _eks_disk(stack: Stack, group: Resource) -> int | None:
    """The root volume of a node group's nodes: its launch template's, the AMI's default when neither sizes it,
    None when the document does not say which template it uses (its disk is then not judged)."""
    if not group.get("launchTemplate"):
        return EKS_DEFAULT_DISK_GIB
    templates = linked_of_type(stack, group, ["launchTemplate"], LAUNCH_TEMPLATE) or [
        found for urn in group.dependencies if (found := stack.get(urn)) and found.type == LAUNCH_TEMPLATE
    ]
    for template in templates:
        for mapping in as_list(template.get("blockDeviceMappings")):
            size = dict_at(dict_at(mapping).get("ebs")).get("volumeSize")
            if isinstance(size, int | float) and not isinstance(size, bool):  # a float through the analyzer
                return int(size)
    return EKS_DEFAULT_DISK_GIB if templates else None


Node = tuple[str, Resources, int, bool]  # type, what a node leaves for pods, its accelerators, disk counted


def node_types(stack: Stack, family: str) -> list[Node]:
    """The node types of every pool labelled `family` (disk is counted on EKS, whose root volume holds the pods'
    ephemeral storage; GKE's model servers ask for none); types the catalogs do not know are left out
    (serving-pools-use-serving-types names them)."""
    found: dict[str, Node] = {}
    for group in stack.of_type(EKS_NODE_GROUP):
        if dict_at(group.get("labels")).get(ACCELERATOR_LABEL) != family:
            continue
        disk = _eks_disk(stack, group)
        for name in as_list(group.get("instanceTypes")):
            try:
                devices = instance_type(name).accelerator_count
                found[f"{name}/{disk}"] = (name, eks.allocatable(name, disk or 0), devices, disk is not None)
            except (UnknownInstanceType, TypeError):
                continue
    for pool in stack.of_type(GKE_NODE_POOL):
        config = dict_at(node_config(pool))
        name = config.get("machineType")
        if dict_at(config.get("labels")).get(ACCELERATOR_LABEL) != family or not isinstance(name, str):
            continue
        try:
            found[name] = (name, gke.allocatable(name), machine_type(name).accelerator.count, False)
        except UnknownMachineType:
            continue
    return list(found.values())


def _holds(node: Node, need: Resources) -> bool:
    _, room, devices, disk = node
    return fits(room, devices, need) and (not disk or not need.disk_gib or room.disk_gib >= need.disk_gib)


def _problem(stack: Stack, workload: Resource) -> str | None:
    family = dict_at(pod_spec(workload).get("nodeSelector")).get(ACCELERATOR_LABEL)
    if not isinstance(family, str):
        return None
    try:
        need = pod_request(workload)
    except ValueError as error:
        return f"has a resource request that is not a Kubernetes quantity ({error})"
    nodes = node_types(stack, family)
    if not nodes or any(_holds(node, need) for node in nodes):
        return None  # no pool to check against (the config check says so), or one holds it
    asks = f"asks for {need.cpu:g} CPU, {need.memory_gib:.1f} GiB of memory" + (
        f", {need.disk_gib:g} GiB of local disk" if need.disk_gib else ""
    )
    leaves = "; ".join(
        f"{name} leaves {room.cpu:.1f} CPU, {room.memory_gib:.1f} GiB"
        + (f", {max(room.disk_gib, 0):.0f} GiB of disk" if disk else "")
        + f" and {n} accelerator(s)"
        for name, room, n, disk in nodes
    )
    return (
        f"{asks} and {need.devices} accelerator(s) per pod, but no node of its {family} pools holds it ({leaves}; "
        "kubelet and DaemonSet reservations, estimated): its pods would stay Pending; lower the requests or add a "
        "larger type (or diskGib) to the pool"
    )


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    findings = []
    for workload in stack.of_type(*WORKLOADS):
        if is_model_server(workload) and (problem := _problem(stack, workload)):
            findings.append(Finding(workload.urn, f"model server {workload.label} {problem}"))
    return findings


RULE = StackRule(
    NAME,
    "Model servers fit the nodes of their pools: CPU, memory, accelerators and local disk within a node's allocatable.",
    "mandatory",
    check,
)
