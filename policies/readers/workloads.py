"""Reading pulumi-kubernetes inputs as rules need them: workloads, what they request, and the
autoscalers (KEDA ScaledObjects, HorizontalPodAutoscalers) that scale them (pure).

Inputs arrive as the manifests' own camelCase fields (`metadata`, `spec`), for built-in kinds and for
CustomResources alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from infra.core.shapes import dict_at
from infra.providers import tokens
from policies.model import Resource, is_unknown
from policies.readers.aws import as_list

DEPLOYMENT = tokens.K8S_DEPLOYMENT
STATEFUL_SET = tokens.K8S_STATEFUL_SET
WORKLOADS = {DEPLOYMENT: "Deployment", STATEFUL_SET: "StatefulSet"}
SCALED_OBJECT = tokens.K8S_KEDA_SCALED_OBJECT
HPA_V1 = tokens.K8S_HORIZONTAL_POD_AUTOSCALER_V1
HPA_V2 = tokens.K8S_HORIZONTAL_POD_AUTOSCALER_V2
HPA_V2BETA2 = tokens.K8S_HORIZONTAL_POD_AUTOSCALER_V2BETA2
HPAS = (HPA_V1, HPA_V2, HPA_V2BETA2)
AUTOSCALERS = (SCALED_OBJECT, *HPAS)

# Device-plugin resources a pod asks for when it runs on an accelerator (NVIDIA, AWS Neuron).
ACCELERATOR_RESOURCES = (
    "nvidia.com/gpu",
    "aws.amazon.com/neuron",
    "aws.amazon.com/neuroncore",
    "aws.amazon.com/neurondevice",
)
INFERENCE_LABEL = ("app.kubernetes.io/component", "inference")
# KEDA scalers and HPA resource metrics that measure CPU or memory, and Prometheus series that do.
CPU_MEMORY = ("cpu", "memory")
_CPU_MEMORY_SERIES = re.compile(
    r"\b(container_(cpu|memory)_\w+|process_(cpu|resident_memory)_\w+|node_(cpu|memory)_\w+)"
)


def metadata(resource: Resource) -> dict:
    return dict_at(resource.get("metadata"))


def spec(resource: Resource) -> dict:
    return dict_at(resource.get("spec"))


def namespace_of(meta: dict) -> str:
    namespace = meta.get("namespace")
    return namespace if isinstance(namespace, str) and namespace else "default"


def workload_key(resource: Resource) -> tuple[str, str, str] | None:
    """(kind, namespace, name) of a Deployment or StatefulSet; None when its name is not known."""
    meta = metadata(resource)
    name = meta.get("name")
    if resource.type not in WORKLOADS or not isinstance(name, str) or is_unknown(name):
        return None
    return WORKLOADS[resource.type], namespace_of(meta), name


def pod_labels(resource: Resource) -> dict:
    """The labels a workload gives its pods (spec.template.metadata.labels)."""
    return dict_at(dict_at(dict_at(spec(resource).get("template")).get("metadata")).get("labels"))


def pod_spec(resource: Resource) -> dict:
    return dict_at(dict_at(spec(resource).get("template")).get("spec"))


# Every kind that carries a pod, by its type token.
POD_KINDS = {
    tokens.K8S_DEPLOYMENT: "Deployment",
    tokens.K8S_STATEFUL_SET: "StatefulSet",
    tokens.K8S_DAEMON_SET: "DaemonSet",
    tokens.K8S_JOB: "Job",
    tokens.K8S_CRON_JOB: "CronJob",
    tokens.K8S_POD: "Pod",
}
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def any_pod_spec(resource: Resource) -> dict:
    """The pod spec of any of POD_KINDS: a Pod's own, a CronJob's job template's, the others' template's."""
    body = spec(resource)
    if resource.type == tokens.K8S_POD:
        return body
    if resource.type == tokens.K8S_CRON_JOB:
        body = dict_at(dict_at(body.get("jobTemplate")).get("spec"))
    return dict_at(dict_at(body.get("template")).get("spec"))


def every_container(resource: Resource) -> list[tuple[str, dict]]:
    """(where, container) for each init, regular and ephemeral container of any of POD_KINDS."""
    pod = any_pod_spec(resource)
    return [
        (f"{part}[{i}]", dict_at(container))
        for part in CONTAINER_LISTS
        for i, container in enumerate(as_list(pod.get(part)))
    ]


def accelerator_requests(resource: Resource) -> list[str]:
    """Accelerator resources the workload's containers request or limit, e.g. ['nvidia.com/gpu']."""
    found: list[str] = []
    for container in as_list(pod_spec(resource).get("containers")):
        resources = dict_at(dict_at(container).get("resources"))
        for part in ("requests", "limits"):
            found.extend(k for k in dict_at(resources.get(part)) if k in ACCELERATOR_RESOURCES and k not in found)
    return found


def is_model_server(resource: Resource) -> bool:
    """A Deployment or StatefulSet that runs on accelerators or is labelled as an inference component."""
    if resource.type not in WORKLOADS:
        return False
    labels = dict_at(metadata(resource).get("labels"))
    return bool(accelerator_requests(resource)) or labels.get(INFERENCE_LABEL[0]) == INFERENCE_LABEL[1]


def scale_target(autoscaler: Resource) -> tuple[str, str, str] | None:
    """(kind, namespace, name) an autoscaler scales (KEDA's kind defaults to Deployment); None if unknown."""
    ref = dict_at(spec(autoscaler).get("scaleTargetRef"))
    name = ref.get("name")
    if not isinstance(name, str) or is_unknown(name):
        return None
    kind = ref.get("kind")
    kind = kind if isinstance(kind, str) else "Deployment"
    return kind, namespace_of(metadata(autoscaler)), name


@dataclass(frozen=True)
class Signal:
    """One trigger (KEDA) or metric (HPA) an autoscaler scales on."""

    where: str  # "triggers[0]", "metrics[1]", "targetCPUUtilizationPercentage", "(default)"
    what: str  # "cpu", "prometheus", "Pods", ...
    cpu_or_memory: bool


def signals(autoscaler: Resource) -> list[Signal]:
    """What an autoscaler scales on. An HPA without metrics scales on CPU (80% utilisation)."""
    body = spec(autoscaler)
    found: list[Signal] = []
    if autoscaler.type == SCALED_OBJECT:
        for i, trigger in enumerate(as_list(body.get("triggers"))):
            trigger = dict_at(trigger)
            kind = str(trigger.get("type", ""))
            query = dict_at(trigger.get("metadata")).get("query")
            cpu = kind in CPU_MEMORY or (isinstance(query, str) and bool(_CPU_MEMORY_SERIES.search(query)))
            found.append(Signal(f"triggers[{i}]", kind, cpu))
        return found
    if autoscaler.type == HPA_V1:
        return [
            Signal(
                "targetCPUUtilizationPercentage" if "targetCPUUtilizationPercentage" in body else "(default)",
                "cpu",
                True,
            )
        ]
    metrics = as_list(body.get("metrics"))
    if not metrics:
        return [Signal("(default)", "cpu", True)]
    for i, metric in enumerate(metrics):
        metric = dict_at(metric)
        kind = str(metric.get("type", ""))
        source = dict_at(metric.get("resource") if kind == "Resource" else metric.get("containerResource"))
        name = source.get("name") if kind in ("Resource", "ContainerResource") else None
        found.append(Signal(f"metrics[{i}]", f"{kind} {name}" if name else kind, name in CPU_MEMORY))
    return found


def autoscaler_kind(autoscaler: Resource) -> str:
    return "ScaledObject" if autoscaler.type == SCALED_OBJECT else "HorizontalPodAutoscaler"
