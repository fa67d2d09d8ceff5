"""Kubernetes objects of one model server (pure): ServiceAccount, Deployment, Service,
PodDisruptionBudget and the KEDA ScaledObject that scales it on queue depth and KV-cache use.

Each function returns a whole manifest (apiVersion, kind, metadata, spec), so tests validate exactly
what the component declares against the Kubernetes and CRD schemas.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infra.registry import layout as registry_layout
from infra.serving import engine, fit, schedule, servers, startup
from infra.serving.aws.config import ModelSpec
from infra.serving.images import ImageSource
from infra.serving.scheduling import ACCELERATOR_LABEL, taint
from infra.serving.spec import SloSpec

Manifest = dict[str, Any]
PROMETHEUS_URL = "http://prometheus-server.monitoring.svc.cluster.local"
SLO_ANNOTATION = "mlinfra.io/slo"


@dataclass(frozen=True)
class Registry:
    """Where the artefacts live: the registry bucket and its region (from the registry stack), or on GCP
    the bridge bucket that mirrors its models/ prefix (scheme "gs")."""

    bucket: str
    region: str
    scheme: str = "s3"
    # Where images come from: the account's ECR pull-through cache, or the project's Artifact Registry remote
    # repository on GKE; None pulls them as named.
    mirror: ImageSource | None = None

    def image(self, image: str) -> str:
        return self.mirror.image(image) if self.mirror else image

    def uri(self, prefix: str) -> str:
        return f"{self.scheme}://{self.bucket}/{prefix}"

    @property
    def mounted(self) -> bool:
        """GCS is mounted (Cloud Storage FUSE): vLLM's streamer reads only s3:// in the pinned releases (0.9.1
        vllm/transformers_utils/utils.py is_s3; anything else goes to the Hugging Face download path)."""
        return self.scheme == "gs"

    def env(self) -> list[dict[str, str]]:
        return [{"name": "AWS_REGION", "value": self.region}] if self.scheme == "s3" else []


def artefact_prefix(model: ModelSpec) -> str:
    """models/<name>/<version>/<variant>/ in the registry (the only prefix the server may read)."""
    return registry_layout.model_prefix(model.name, model.version, model.artefact_variant)


def labels(model: ModelSpec) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "model-server",
        "app.kubernetes.io/instance": model.name,
        "app.kubernetes.io/version": model.version,
        "app.kubernetes.io/component": "inference",
        "app.kubernetes.io/managed-by": "mlinfra",
        ACCELERATOR_LABEL: model.accelerator,
    }


def selector(model: ModelSpec) -> dict[str, str]:
    return {"app.kubernetes.io/name": "model-server", "app.kubernetes.io/instance": model.name}


def metadata(model: ModelSpec, ns: str) -> dict[str, Any]:
    return {"name": model.name, "namespace": ns, "labels": labels(model)}


def deployment_metadata(
    model: ModelSpec, ns: str, budgets: Mapping[str, startup.StartupBudget] | None = None
) -> dict[str, Any]:
    """The Deployment's metadata, with the architecture and precision the fit policy checks, the model's SLO and
    its start-up budget on each type that holds a replica (on the object, not the pod template: changing them
    never restarts a replica)."""
    meta = metadata(model, ns)
    found = fit.deployment_annotations(model)
    if model.slo is not None:
        found[SLO_ANNOTATION] = slo_annotation(model.slo)
    if budgets:
        found[startup.STARTUP_ANNOTATION] = startup.annotation(budgets)
    if found:
        meta["annotations"] = found
    return meta


def slo_annotation(slo: SloSpec) -> str:
    """The model's latency targets on its Deployment, for tools that read a preview (`simulate`)."""
    return json.dumps({"ttftP95Ms": slo.ttft_p95_ms, "tpotP95Ms": slo.tpot_p95_ms}, sort_keys=True)


def slo_from_annotations(annotations: Mapping[str, Any]) -> tuple[float, float] | None:
    """(TTFT p95, TPOT p95) in ms from a Deployment's annotations; None without the annotation; ValueError
    when it is not one mlinfra wrote."""
    raw = annotations.get(SLO_ANNOTATION)
    if raw is None:
        return None
    try:
        value = json.loads(str(raw))
        ttft, tpot = float(value["ttftP95Ms"]), float(value["tpotP95Ms"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        raise ValueError(f"{SLO_ANNOTATION} is not an SLO written by mlinfra: {raw!r}") from None
    if not (ttft > 0 and tpot > 0):
        raise ValueError(f"{SLO_ANNOTATION} is not an SLO written by mlinfra: {raw!r}")
    return ttft, tpot


def namespace(name: str) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "mlinfra"}},
    }


def service_account(model: ModelSpec, ns: str, annotations: Mapping[str, Any] | None = None) -> Manifest:
    # On EKS no annotations: Pod Identity maps this account to its role on the AWS side. On GKE, Workload
    # Identity reads iam.gke.io/gcp-service-account.
    meta = metadata(model, ns)
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta, "automountServiceAccountToken": False}


def _probe(path: str, period: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period,
        "timeoutSeconds": 5,
        "failureThreshold": failures,
    }


def _container(model: ModelSpec, registry: Registry, local_copy_gib: int | None) -> dict[str, Any]:
    """`local_copy_gib`: the volume a server that fetches its artefact to disk copies it to, None for the others."""
    profile = servers.PROFILES[model.accelerator]
    source = registry.uri(artefact_prefix(model))
    n = str(model.accelerators_per_replica)
    mounts: list[dict[str, Any]] = [servers.shm_mount()]
    env = registry.env()
    local = profile.fetch_to_disk or registry.mounted
    if local:
        mounts.append({"name": "model", "mountPath": servers.MODEL_DIR, "readOnly": True})
    if profile.fetch_to_disk:
        # The compiled model promote built for exactly this engine shape (engine.py): loaded as it is,
        # never recompiled into the read-only mount.
        env.append({"name": "NEURON_COMPILED_ARTIFACTS", "value": f"{servers.MODEL_DIR}/{engine.NEURON_COMPILED_DIR}"})
    return {
        "name": "server",
        "image": registry.image(model.image),
        "command": servers.server_command(model),
        "args": servers.server_args(model, servers.MODEL_DIR if local else source),
        "env": env,
        "ports": [{"name": "http", "containerPort": servers.PORT, "protocol": "TCP"}],
        "resources": {
            "requests": {
                "cpu": str(model.cpu),
                "memory": f"{model.memory_gib}Gi",
                profile.resource: n,
                # The artefact's local copy is scheduled like the rest: a node without the disk is not chosen.
                **({"ephemeral-storage": f"{local_copy_gib}Gi"} if local_copy_gib is not None else {}),
            },
            "limits": {"memory": f"{model.memory_gib}Gi", profile.resource: n},
        },
        # Loading weights (and Neuron graphs) takes minutes: the startup probe holds off the others.
        "startupProbe": _probe("/health", 10, -(-profile.startup.load_seconds // 10)),
        "readinessProbe": _probe("/health", servers.READINESS_PERIOD_SECONDS, 3),
        "livenessProbe": _probe("/health", 15, 4),
        "volumeMounts": mounts,
        "lifecycle": {"preStop": {"exec": {"command": servers.drain_command()}}},
        "securityContext": {"allowPrivilegeEscalation": False},
    }


def _fetch_container(model: ModelSpec, registry: Registry) -> dict[str, Any]:
    source = f"s3://{registry.bucket}/{artefact_prefix(model)}"
    return {
        "name": "fetch-model",
        "image": registry.image(servers.AWS_CLI_IMAGE),
        # The compiled shape too: a Neuron artefact built for another engine would start, then fail (engine.py).
        "command": servers.fetch_command(source, servers.compiled_shape(engine.engine_settings(model).keywords())),
        "env": [{"name": "AWS_REGION", "value": registry.region}],
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
        "volumeMounts": [{"name": "model", "mountPath": servers.MODEL_DIR}],
        "securityContext": {"allowPrivilegeEscalation": False},
    }


def _check_container(model: ModelSpec, registry: Registry) -> dict[str, Any]:
    """Streaming servers fetch nothing before they start: this step only refuses a failed or unfinished artefact."""
    return {
        "name": "check-model",
        "image": registry.image(servers.AWS_CLI_IMAGE),
        "command": servers.check_command(f"s3://{registry.bucket}/{artefact_prefix(model)}"),
        "env": [{"name": "AWS_REGION", "value": registry.region}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False},
    }


def _mounted_check_container(model: ModelSpec, registry: Registry) -> dict[str, Any]:
    """On GKE: the same refusal, read from the mounted artefact (the FUSE sidecar runs as a native sidecar,
    before the init containers), in the server's own image."""
    return {
        "name": "check-model",
        "image": registry.image(model.image),
        "command": servers.mounted_check_command(registry.uri(artefact_prefix(model))),
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "volumeMounts": [{"name": "model", "mountPath": servers.MODEL_DIR, "readOnly": True}],
        "securityContext": {"allowPrivilegeEscalation": False},
    }


def _fuse_volume(model: ModelSpec, registry: Registry) -> dict[str, Any]:
    """The artefact's prefix of the bucket, read-only, through GKE's Cloud Storage FUSE CSI driver."""
    return {
        "name": "model",
        "csi": {
            "driver": "gcsfuse.csi.storage.gke.io",
            "readOnly": True,
            "volumeAttributes": {
                "bucketName": registry.bucket,
                "mountOptions": f"implicit-dirs,only-dir={artefact_prefix(model).rstrip('/')}",
            },
        },
    }


# The FUSE sidecar's own limits off: loading multi-GB weights through a capped sidecar is slow or OOM-killed
# (GKE's "Cloud Storage FUSE CSI driver" sidecar resource annotations; "0" means no limit).
FUSE_ANNOTATIONS = {
    "gke-gcsfuse/volumes": "true",
    "gke-gcsfuse/cpu-limit": "0",
    "gke-gcsfuse/memory-limit": "0",
    "gke-gcsfuse/ephemeral-storage-limit": "0",
}


# EKS managed node groups label their nodes ON_DEMAND or SPOT: replicas spread over both, so a Spot
# pool's on-demand baseline holds one.
CAPACITY_TYPE_LABEL = "eks.amazonaws.com/capacityType"


def _spread(model: ModelSpec, registry: Registry) -> list[dict[str, Any]]:
    keys = ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]
    if registry.scheme == "s3":
        keys.append(CAPACITY_TYPE_LABEL)
    return [
        {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": selector(model)},
        }
        for key in keys
    ]


# Local volumes the cluster autoscaler may drop when it removes a node (utils/drain at cluster-autoscaler 1.33.0:
# names split on ",", matched exactly).
LOCAL_VOLUMES_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"


def deployment(
    model: ModelSpec, ns: str, registry: Registry, budgets: Mapping[str, startup.StartupBudget] | None = None
) -> Manifest:
    profile = servers.PROFILES[model.accelerator]
    local_copy_gib = fit.artefact_volume_gib(model) if profile.fetch_to_disk else None
    volumes: list[dict[str, Any]] = [servers.shm_volume()]
    pod: dict[str, Any] = {
        "serviceAccountName": model.name,
        "automountServiceAccountToken": False,
        "nodeSelector": {ACCELERATOR_LABEL: model.accelerator},
        "tolerations": [taint(model.accelerator).toleration()],
        "topologySpreadConstraints": _spread(model, registry),
        "terminationGracePeriodSeconds": servers.termination_grace_seconds(model),
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [_container(model, registry, local_copy_gib)],
        "volumes": volumes,
    }
    if profile.scheduler_name:
        pod["schedulerName"] = profile.scheduler_name
    if profile.fetch_to_disk:
        volumes.append({"name": "model", "emptyDir": {"sizeLimit": f"{local_copy_gib}Gi"}})
        pod["initContainers"] = [_fetch_container(model, registry)]
    elif registry.mounted:
        volumes.append(_fuse_volume(model, registry))
        pod["initContainers"] = [_mounted_check_container(model, registry)]
    else:
        pod["initContainers"] = [_check_container(model, registry)]
    annotations = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(servers.PORT),
        "prometheus.io/path": "/metrics",
        **(FUSE_ANNOTATIONS if registry.mounted else {}),
        # The artefact's local copy is fetched again on the next start: it must not keep the cluster autoscaler
        # from consolidating the node (a disk emptyDir blocks scale-down unless named here; /dev/shm, in memory,
        # never does).
        **({LOCAL_VOLUMES_ANNOTATION: "model"} if profile.fetch_to_disk else {}),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": deployment_metadata(model, ns, budgets),
        "spec": {
            # No `replicas`: KEDA's HPA owns the count (it starts at minReplicaCount). Declaring it too
            # makes every update fight kube-controller-manager over the field (pulumi-kubernetes #2491).
            "selector": {"matchLabels": selector(model)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {"metadata": {"labels": labels(model), "annotations": annotations}, "spec": pod},
        },
    }


def service(model: ModelSpec, ns: str) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(model, ns),
        "spec": {
            "type": "ClusterIP",
            "selector": selector(model),
            "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def pod_disruption_budget(model: ModelSpec, ns: str) -> Manifest:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(model, ns),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector(model)}},
    }


# Samples are averaged over a minute so one scrape's spike or gap does not move the HPA.
SMOOTHING = "1m"


def metric_queries(model: ModelSpec, ns: str) -> dict[str, str]:
    """PromQL over the model's pods (the scrape config turns pod labels into metric labels). Each query
    answers 0, never nothing, while no replica has reported yet (after a Prometheus restart)."""
    match = f'namespace="{ns}",app_kubernetes_io_instance="{model.name}"'

    def smoothed(metric: str) -> str:
        return f"avg_over_time({metric}{{{match}}}[{SMOOTHING}])"

    if servers.PROFILES[model.accelerator].fetch_to_disk:
        # Neuron: the batch is compiled in, so pressure is the share of its sequence slots in use.
        load = f"avg({smoothed(servers.RUNNING_METRIC)}) / {engine.max_num_seqs(model)}"
    else:
        # `or` keeps the old name's series only for pods without the new one: each pod counts once.
        load = "avg(" + " or ".join(smoothed(metric) for metric in servers.KV_CACHE_METRICS) + ")"
    return {
        "queue-depth": f"sum({smoothed(servers.QUEUE_METRIC)}) or vector(0)",
        "kv-cache": f"({load}) or vector(0)",
    }


def held_query(model: ModelSpec, ns: str) -> str:
    """Requests the model's endpoint picker holds in its flow-control queue (GIE v1.5.0's
    inference_extension_flow_control_queue_size, labelled by InferencePool): the demand while no replica serves."""
    return f'sum({servers.HELD_METRIC}{{namespace="{ns}",inference_pool="{model.name}"}}) or vector(0)'


def _schedule_triggers(model: ModelSpec, budgets: Mapping[str, startup.StartupBudget]) -> list[dict[str, Any]]:
    if model.schedule is None:
        return []
    found = schedule.cron_triggers(
        model.schedule.timezone, model.schedule.as_tuples(), model.min_replicas, startup.lead_seconds(budgets)
    )
    return [
        {
            "type": "cron",
            "name": f"schedule-{index}",
            "metadata": {
                "timezone": t.timezone,
                "start": t.start,
                "end": t.end,
                "desiredReplicas": str(t.desired),
            },
        }
        for index, t in enumerate(found)
    ]


def scaled_object(model: ModelSpec, ns: str, budgets: Mapping[str, startup.StartupBudget] | None = None) -> Manifest:
    """The model's KEDA ScaledObject. `budgets`: its start-up on each type that holds a replica, which a scheduled
    minimum is asked for ahead by and a scale to zero cools down for."""
    budgets = budgets or {}
    scaling = model.autoscaling
    queries = metric_queries(model, ns)
    triggers = [
        # Waiting requests summed over replicas; AverageValue divides by the replica count.
        {
            "type": "prometheus",
            "name": "queue-depth",
            "metricType": "AverageValue",
            "metadata": {
                "serverAddress": PROMETHEUS_URL,
                "query": queries["queue-depth"],
                "threshold": str(fit.queue_depth_target(model)),
            },
        },
        # Mean KV-cache use (batch-slot use on Neuron); Value scales replicas by observed/target.
        {
            "type": "prometheus",
            "name": "kv-cache",
            "metricType": "Value",
            "metadata": {
                "serverAddress": PROMETHEUS_URL,
                "query": queries["kv-cache"],
                "threshold": f"{scaling.kv_cache_target:g}",
            },
        },
    ]
    zero: dict[str, Any] = {}
    if model.scale_to_zero is not None:
        # The requests the front door holds while no replica serves wake the pool (any one activates it) and, per
        # replica, count as waiting requests do.
        triggers.append(
            {
                "type": "prometheus",
                "name": "held",
                "metricType": "AverageValue",
                "metadata": {
                    "serverAddress": PROMETHEUS_URL,
                    "query": held_query(model, ns),
                    "threshold": str(fit.queue_depth_target(model)),
                    "activationThreshold": "0",
                },
            }
        )
        zero["cooldownPeriod"] = startup.cooldown_seconds(model, budgets)
    triggers += _schedule_triggers(model, budgets)
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": metadata(model, ns),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": model.name},
            "minReplicaCount": model.min_replicas,
            "maxReplicaCount": model.max_replicas,
            "pollingInterval": scaling.polling_interval_seconds,
            **zero,
            # No `fallback`: KEDA allows it only when every trigger is AverageValue. If Prometheus cannot
            # be read, the HPA keeps the current replica count.
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {
                        "scaleDown": {
                            "stabilizationWindowSeconds": scaling.scale_down_stabilization_seconds,
                            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 120}],
                        },
                        "scaleUp": {
                            "stabilizationWindowSeconds": 0,
                            "policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}],
                        },
                    }
                }
            },
            "triggers": triggers,
        },
    }


def model_server_objects(
    model: ModelSpec, ns: str, registry: Registry, budgets: Mapping[str, startup.StartupBudget] | None = None
) -> list[Manifest]:
    """Every object of one model server, in apply order."""
    return [
        service_account(model, ns),
        deployment(model, ns, registry, budgets),
        service(model, ns),
        pod_disruption_budget(model, ns),
        scaled_object(model, ns, budgets),
    ]
