"""The twin's settings read from a stack's preview document (ours or `pulumi preview --json`'s), never from the
stack file: what the twin runs is what the program declared (docs/simulate.md).

Per model: its KEDA ScaledObject (triggers, pollingInterval, cooldownPeriod, min/max, the HPA behaviour under
advanced.horizontalPodAutoscalerConfig), the Deployment it scales (the model's architecture and precision
annotations, the vLLM arguments, accelerators, CPU and memory requested, readiness probe, preStop, grace period),
the EKS node groups or GKE node pools its nodeSelector matches (instance or machine type, Spot or on demand,
min/max and the nodes at the start: desiredSize on EKS, the autoscaler's total minimum on GKE), the
cluster-autoscaler release's extraArgs (GKE runs its own autoscaler: its documented defaults) and the
Prometheus release's scrape interval. A setting the twin cannot read is an InputError naming the resource and
the key.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, fields
from typing import Any

from infra.catalog.accelerators import UnknownAcceleratorFact, precision, serving_offer
from infra.catalog.aws import instance_type as instance_facts
from infra.catalog.gcp import machine_type as gcp_machine
from infra.core.errors import InputError, Problem
from infra.core.quantity import quantity
from infra.providers import tokens
from infra.serving import schedule
from infra.serving.manifests import slo_from_annotations
from infra.serving.model_shape import ModelShape
from infra.serving.performance import ReplicaDoesNotFit, replica_performance
from infra.serving.startup import startup_budget, startup_facts
from infra.serving.twin.hpa import DEFAULT_DOWN, DEFAULT_UP, Behavior, Policy, Rules
from infra.serving.twin.keda import Query, ScaledObject, Trigger, UnknownQuery, parse_query
from infra.serving.twin.settings import Autoscaler, Drain, Hold, Limits, NodeGroup, Twin
from infra.tools.preview_json import PolicyResource, PreviewDocument, as_stack
from policies.model import Stack
from policies.readers import gateways
from policies.readers.pickers import Picker, pickers

ACCELERATOR_RESOURCES = ("nvidia.com/gpu", "aws.amazon.com/neuron")
ACCELERATOR_LABEL = "mlinfra.io/accelerator"
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
# What a node keeps for the kubelet and the system (EKS bootstrap reserves ~0.1 vCPU and ~10% of memory on
# these sizes); a pod that asks for more than the rest does not fit the type.
RESERVED_CPU, MEMORY_SHARE = 0.1, 0.9
DEFAULT_SLO = (2.0, 0.1)  # TTFT and TPOT p95 (s) of a model that declares none


def duration_seconds(text: str, where: str) -> float:
    """A Go/Prometheus duration of one unit ("15s", "5m") in seconds."""
    match = _DURATION.match(str(text).strip())
    if not match:
        raise InputError(Problem(where, f"{text!r} is not a duration the twin reads (a number and ms, s, m or h)"))
    return float(match.group(1)) * _UNIT[match.group(2)]


def _rules(raw: Any, default: Rules, where: str) -> Rules:
    if not raw:
        return default
    policies = (
        tuple(Policy(p["type"], int(p["value"]), int(p["periodSeconds"])) for p in raw.get("policies") or [])
        or default.policies
    )
    return Rules(
        float(raw.get("stabilizationWindowSeconds", default.stabilization_seconds)),
        policies,
        raw.get("selectPolicy", default.select),
    )


def _scaled_object(resource: PolicyResource) -> ScaledObject:
    spec = resource.props.get("spec") or {}
    where = f"ScaledObject {resource.name}"
    behavior = (((spec.get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}).get("behavior")) or {}
    triggers = []
    for i, raw in enumerate(spec.get("triggers") or []):
        meta = raw.get("metadata") or {}
        path = f"{where}: spec.triggers[{i}]"
        if raw.get("type") == "cron":
            triggers.append(_cron_trigger(raw, path, i))
            continue
        if raw.get("type") != "prometheus":
            raise InputError(
                Problem(path, f"type {raw.get('type')!r}: the twin reads prometheus and cron triggers only")
            )
        try:
            query = parse_query(meta.get("query", ""))
        except UnknownQuery as error:
            raise InputError(Problem(f"{path}.metadata.query", str(error))) from None
        triggers.append(
            Trigger(
                raw.get("name") or f"trigger-{i}",
                query,
                raw.get("metricType") or "AverageValue",
                float(meta["threshold"]),
                float(meta.get("activationThreshold", 0)),
            )
        )
    if not triggers:
        raise InputError(Problem(f"{where}: spec.triggers", "no trigger: nothing would scale the model"))
    idle = spec.get("idleReplicaCount")
    return ScaledObject(
        int(spec.get("minReplicaCount", 0)),
        int(spec.get("maxReplicaCount", 100)),
        float(spec.get("pollingInterval", 30)),
        float(spec.get("cooldownPeriod", 300)),
        tuple(triggers),
        Behavior(
            _rules(behavior.get("scaleUp"), DEFAULT_UP, where), _rules(behavior.get("scaleDown"), DEFAULT_DOWN, where)
        ),
        int(idle) if idle is not None else None,
    )


def _cron_trigger(raw: dict[str, Any], path: str, index: int) -> Trigger:
    """A schedule's cron trigger as the twin plays it: the trace starts on a Monday at 00:00 in its time zone."""
    meta = raw.get("metadata") or {}
    try:
        windows = schedule.cron_windows(str(meta.get("start", "")), str(meta.get("end", "")))
        desired = float(int(meta["desiredReplicas"]))
    except (ValueError, KeyError) as error:
        raise InputError(Problem(f"{path}.metadata", str(error))) from None
    query = Query("schedule", "sum", 0.0, windows=tuple((s * 60.0, e * 60.0, desired) for s, e in windows))
    return Trigger(raw.get("name") or f"trigger-{index}", query, "AverageValue", 1.0)


def _arg(args: list[str], flag: str, default: str | None = None) -> str | None:
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else default


def _release(document: PreviewDocument, chart: str) -> dict[str, Any]:
    for r in document.resources:
        if r.type == tokens.K8S_HELM_RELEASE and r.props.get("chart") == chart:
            values: dict[str, Any] = r.props.get("values") or {}
            return values
    return {}


def _autoscaler(document: PreviewDocument) -> Autoscaler:
    extra = _release(document, "cluster-autoscaler").get("extraArgs") or {}
    where = "cluster-autoscaler release: values.extraArgs"
    base = Autoscaler()
    return Autoscaler(
        duration_seconds(extra["scan-interval"], f"{where}.scan-interval")
        if "scan-interval" in extra
        else base.scan_seconds,
        duration_seconds(extra["scale-down-unneeded-time"], f"{where}.scale-down-unneeded-time")
        if "scale-down-unneeded-time" in extra
        else base.unneeded_seconds,
        duration_seconds(extra["scale-down-delay-after-add"], f"{where}.scale-down-delay-after-add")
        if "scale-down-delay-after-add" in extra
        else base.delay_after_add_seconds,
    )


def _scrape_seconds(document: PreviewDocument) -> float:
    server = _release(document, "prometheus").get("server") or {}
    interval = (server.get("global") or {}).get("scrape_interval", "1m")  # Prometheus's own default: 1m
    return duration_seconds(interval, "prometheus release: values.server.global.scrape_interval")


def _drain(pod: dict[str, Any], container: dict[str, Any]) -> Drain:
    stop = ((container.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}
    command = " ".join(str(c) for c in stop.get("command") or [])
    sleep = re.search(r"(?:time\.)?sleep\(?\s*(\d+(?:\.\d+)?)", command)
    return Drain(
        float(pod.get("terminationGracePeriodSeconds", 30)),  # the Kubernetes default: 30 s
        float(sleep.group(1)) if sleep else 0.0,
        "num_requests_" in command,
    )


def _shape(annotations: dict[str, Any], where: str) -> ModelShape:
    raw = annotations.get("mlinfra.io/model-architecture")
    if not raw:
        raise InputError(
            Problem(f"{where}: metadata.annotations", "no mlinfra.io/model-architecture: set the model's modelConfig")
        )
    data = json.loads(raw)
    known = {f.name for f in fields(ModelShape)}
    return ModelShape(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class Pool:
    """A node group (EKS) or node pool (GKE) as the twin needs it."""

    name: str
    cloud: str
    labels: dict[str, Any]
    instance_type: str
    spot: bool
    min_size: int
    max_size: int
    desired: int
    network_gbps: float | None  # the catalog's figure, None where it has none


def _aws_gbps(instance_type: str) -> float | None:
    try:
        return instance_facts(instance_type).total_bandwidth_gbps
    except LookupError:
        return None  # not a serving type the catalog holds (a system pool): it never holds a replica


def _pools(document: PreviewDocument) -> list[Pool]:
    """Every EKS node group and GKE node pool of the document."""
    pools = []
    for r in document.resources:
        props = r.props
        if r.type == tokens.AWS_EKS_NODE_GROUP:
            scaling = props.get("scalingConfig") or {}
            instance_type = props["instanceTypes"][0]
            pools.append(
                Pool(
                    f"NodeGroup {r.name}", "aws", props.get("labels") or {}, instance_type,
                    props.get("capacityType") == "SPOT", int(scaling.get("minSize", 0)), int(scaling.get("maxSize", 0)),
                    int(scaling.get("desiredSize", scaling.get("minSize", 0))),
                    _aws_gbps(instance_type),
                )
            )  # fmt: skip
        elif r.type == tokens.GCP_CONTAINER_NODE_POOL:
            node = props.get("nodeConfig") or {}
            auto = props.get("autoscaling") or {}
            zones = len(props.get("nodeLocations") or []) or 1
            fixed = int(props.get("nodeCount", props.get("initialNodeCount", 0))) * zones
            low = auto.get("totalMinNodeCount", int(auto.get("minNodeCount", fixed // zones)) * zones)
            high = auto.get("totalMaxNodeCount", int(auto.get("maxNodeCount", fixed // zones)) * zones)
            machine = node.get("machineType", "")
            try:
                bandwidth = gcp_machine(machine).max_bandwidth_gbps
            except LookupError:
                bandwidth = None
            pools.append(
                Pool(
                    f"NodePool {r.name}", "gcp", node.get("labels") or {}, machine,
                    bool(node.get("spot") or node.get("preemptible")), int(low), int(high), int(low), bandwidth,
                )
            )  # fmt: skip
    return pools


def twins(
    document: PreviewDocument,
    ttft_slo: float | None,
    tpot_slo: float | None,
    timeout: float,
    spot_rate: float,
    callers: int = 1,
    week_start_seconds: float = 0.0,
) -> list[Twin]:
    """One Twin per ScaledObject of the document whose target is a Deployment of the document. The SLO of the
    share over it: `ttft_slo`/`tpot_slo` (seconds) where given, else the model's own (`models[i].slo`, which
    its Deployment carries), else DEFAULT_SLO. Behind a front door, the gateway's per-key limits over `callers`
    keys. The trace starts `week_start_seconds` after Monday 00:00 in a schedule's time zone."""
    deployments = {
        (r.props.get("metadata") or {}).get("name"): r for r in document.resources if r.type == tokens.K8S_DEPLOYMENT
    }
    pools = _pools(document)
    autoscaler, scrape = _autoscaler(document), _scrape_seconds(document)
    stack = as_stack(document)
    limits = gateway_limits(stack, callers)
    stack_pickers = pickers(stack)
    found = []
    for resource in document.resources:
        if resource.type != tokens.K8S_KEDA_SCALED_OBJECT:
            continue
        scaled = _scaled_object(resource)
        target = ((resource.props.get("spec") or {}).get("scaleTargetRef") or {}).get("name")
        deployment = deployments.get(target)
        if deployment is None:
            continue
        where = f"Deployment {deployment.name}"
        metadata = deployment.props.get("metadata") or {}
        pod = ((deployment.props.get("spec") or {}).get("template") or {}).get("spec") or {}
        container = (pod.get("containers") or [{}])[0]
        args = [str(a) for a in container.get("args") or []]
        requests = (container.get("resources") or {}).get("requests") or {}
        per_pod = next((int(requests[k]) for k in ACCELERATOR_RESOURCES if k in requests), 1)
        accelerator = (pod.get("nodeSelector") or {}).get(ACCELERATOR_LABEL)
        shape = _shape(metadata.get("annotations") or {}, where)
        precision_name = (metadata.get("annotations") or {}).get("mlinfra.io/precision", "bf16")
        readiness = container.get("readinessProbe") or {}
        readiness_period = float(readiness.get("periodSeconds", 10))
        node_groups = []
        pull_seconds = 0.0  # the image's pull, the same on every type (the budget's image term)
        perf = None
        for group in pools:
            if group.labels.get(ACCELERATOR_LABEL) != accelerator:
                continue
            try:
                offer = serving_offer(group.cloud, group.instance_type)
            except UnknownAcceleratorFact as error:
                raise InputError(Problem(f"{group.name}: instance type", str(error))) from None
            fit = min(
                offer.devices // per_pod,
                int((offer.vcpus - RESERVED_CPU) // quantity(requests.get("cpu", 1))),
                int(offer.memory_gib * 1024**3 * MEMORY_SHARE // quantity(requests.get("memory", "1Gi"))),
            )
            if fit < 1:  # the pod does not fit this type: its nodes cost, but never hold a replica
                fit = 0
            try:
                perf = perf or replica_performance(
                    shape,
                    offer.device,
                    precision(precision_name),
                    int(_arg(args, "--tensor-parallel-size", "1") or 1) // offer.device.engine_shards or 1,
                    int(_arg(args, "--max-model-len", "4096") or 4096),
                    int(_arg(args, "--max-num-seqs", "256") or 256),
                )
            except ReplicaDoesNotFit as error:
                raise InputError(Problem(where, str(error))) from None
            budget = startup_budget(
                group.instance_type, offer.device.kind, group.network_gbps, perf.fit.weights, readiness_period
            )
            pull_seconds = budget.image.seconds
            node_groups.append(
                NodeGroup(
                    group.name,
                    group.instance_type,
                    group.spot,
                    group.min_size,
                    group.max_size,
                    group.desired,
                    offer.price_per_hour,
                    fit,
                    budget.node.seconds,
                    budget.pod_start_seconds,
                )
            )
        if perf is None:
            raise InputError(
                Problem(
                    where,
                    f"no EKS node group or GKE node pool labelled {ACCELERATOR_LABEL}={accelerator}",
                )
            )
        try:
            declared = slo_from_annotations(metadata.get("annotations") or {})
        except ValueError as error:
            raise InputError(Problem(where, str(error))) from None
        own = (declared[0] / 1000, declared[1] / 1000) if declared else DEFAULT_SLO
        # A model that may be at zero starts as its schedule (or minimum) has it at the trace's start.
        opening = max(
            (t.query.scheduled(week_start_seconds) for t in scaled.triggers if t.query.series == "schedule"), default=0
        )
        initial = int(max(scaled.min_replicas, opening)) if scaled.scales_to_zero else None
        picker = _picker(stack_pickers, metadata)
        picked = picker is not None
        found.append(
            Twin(
                model=str(metadata.get("name") or target),
                perf=perf,
                scaled=scaled,
                node_groups=tuple(node_groups),
                drain=_drain(pod, container),
                scrape_seconds=scrape,
                readiness_period_seconds=readiness_period,
                image_pull_seconds=pull_seconds,
                autoscaler=autoscaler,
                ttft_slo_seconds=own[0] if ttft_slo is None else ttft_slo,
                tpot_slo_seconds=own[1] if tpot_slo is None else tpot_slo,
                timeout_seconds=timeout,
                spot_interruptions_per_node_hour=spot_rate,
                spot_notice_seconds=float(startup_facts()["spotNoticeSeconds"]["value"]),
                routing="picker" if picked else "random",
                limits=limits if picked else None,
                initial_replicas=initial,
                week_start_seconds=week_start_seconds,
                hold=_hold(picker, f"the {metadata.get('name', target)} picker") if picker is not None else None,
            )
        )
    return found


def _picker(found: list[Picker], metadata: dict[str, Any]) -> Picker | None:
    """The endpoint picker whose InferencePool (the inferencepool chart's release) holds the Deployment's pods, whose
    requests it then places, not kube-proxy; None without one."""
    labels = metadata.get("labels") or {}
    return next((p for p in found if p.selects(labels)), None)


def _hold(picker: Picker, where: str) -> Hold | None:
    """The picker's flow control, where its config file turns it on: how long and how many requests it holds."""
    if picker.config_error:
        raise InputError(Problem(f"{where}: pluginsCustomConfig", picker.config_error))
    if not picker.holds:
        return None
    seconds = duration_seconds(picker.hold, f"{where}: flowControl.defaultRequestTTL") if picker.hold else math.inf
    most = picker.max_requests
    try:
        count = int(str(most)) if most is not None else 1_000_000
    except ValueError:
        raise InputError(
            Problem(f"{where}: flowControl.maxRequests", f"{most!r}: the twin reads a whole number of requests")
        ) from None
    return Hold(seconds, count)


def gateway_limits(stack: Stack, callers: int) -> Limits | None:
    """The front door's per-caller limits (Envoy Gateway BackendTrafficPolicy global rules of unit Minute: one
    counting requests, one costed from the response's tokens), shared evenly by the models it routes (the twin
    runs each model with the same rate). None: no such limits."""
    per_minute = [rule for rule in gateways.rate_limits(stack) if rule.unit == "Minute" and rule.count >= 1]
    requests = [rule.count for rule in per_minute if not rule.tokens]
    token_counts = [rule.count for rule in per_minute if rule.tokens]
    if not per_minute:
        return None
    return Limits(
        requests_per_minute=min(requests, default=None),
        tokens_per_minute=min(token_counts, default=None),
        callers=callers,
        share=1 / max(len(gateways.routed_models(stack)), 1),
    )
