"""Pinned Helm charts of the serving stack's front door and their values (pure), on either cloud.

Envoy AI Gateway v1.1.0 is built and tested against Envoy Gateway v1.8 (its go.mod: envoyproxy/gateway v1.8.1)
and the Gateway API Inference Extension v1.0.2 (its e2e suite installs that release's InferencePool manifests and
endpoint picker). The picker here is v1.5.0's, the last release of it in that repository (v1.6.0 moved it to
llm-d): v1.3.0 is the first whose flow control holds a request while a pool has no pod, which scale to zero needs.
Read at both tags, what AI Gateway relies on did not change: the InferencePool v1 API (v1.5.0 only adds
appProtocol and up to 8 ports; AI Gateway's converter drops fields it does not know), and the ext_proc exchange
(full-duplex streamed body, the x-gateway-destination-endpoint header the picker answers with, which AI Gateway's
original-destination cluster routes on). A real cluster confirms the pair. These charts stamp their version into
Chart.yaml at release, so their facts (tests/contracts/data/charts/) are extracted from the release tag with the
published version.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import yaml

from infra.serving import servers
from infra.serving.charts import Chart
from infra.serving.front_door import CONTROLLER_NAME, GATEWAY_NAMESPACE, REDIS_URL
from infra.serving.manifests import selector
from infra.serving.spec import ModelSpec

AI_GATEWAY_NAMESPACE = "envoy-ai-gateway-system"
AI_GATEWAY_CONTROLLER = "ai-gateway-controller"  # controller.fullnameOverride: its Service's name, which EG calls
AI_GATEWAY_EXTENSION_PORT = 1063  # the controller's extension server for Envoy Gateway (chart's service ports)
INFERENCE_EXTENSION_VERSION = "v1.5.0"
# The InferencePool (v1), InferenceObjective and InferenceModelRewrite CRDs of that release (the chart installs
# none; the picker watches the pool and, where their CRDs exist, the other two): `make artifacts` at the tag
# (kustomize build config/crd), attached to the release as AI Gateway v1.1.0's e2e suite fetches v1.0.2's.
INFERENCE_EXTENSION_CRDS = (
    "https://github.com/kubernetes-sigs/gateway-api-inference-extension/releases/download/"
    f"{INFERENCE_EXTENSION_VERSION}/manifests.yaml"
)

ENVOY_GATEWAY = Chart("envoy-gateway", "oci://docker.io/envoyproxy/gateway-helm", "v1.8.3", None, GATEWAY_NAMESPACE)
AI_GATEWAY_CRDS = Chart(
    "ai-gateway-crds", "oci://docker.io/envoyproxy/ai-gateway-crds-helm", "v1.1.0", None, AI_GATEWAY_NAMESPACE
)
AI_GATEWAY = Chart("ai-gateway", "oci://docker.io/envoyproxy/ai-gateway-helm", "v1.1.0", None, AI_GATEWAY_NAMESPACE)
# External Secrets Operator: the API keys from the cloud's secret store into the Secret the gateway reads. ESO tests
# each release on the newest Kubernetes only (2.9: 1.36, its stability-support table) and declares kubeVersion
# >= 1.19; it uses only stable APIs, so it runs on 1.32-1.35, which a real cluster confirms.
SECRETS_NAMESPACE = "external-secrets"
SECRETS_ACCOUNT = "external-secrets"
EXTERNAL_SECRETS = Chart(
    "external-secrets", "external-secrets", "2.9.0", "https://charts.external-secrets.io", SECRETS_NAMESPACE
)


def inference_pool_chart(model: ModelSpec, ns: str) -> Chart:
    """One release per model: the InferencePool takes the release's name, the endpoint picker `<name>-epp`."""
    return Chart(
        model.name,
        "oci://registry.k8s.io/gateway-api-inference-extension/charts/inferencepool",
        INFERENCE_EXTENSION_VERSION,
        None,
        ns,
    )


def envoy_gateway_values(system_pool: dict[str, str]) -> dict[str, Any]:
    """What AI Gateway needs of Envoy Gateway (its manifests/envoy-gateway-values.yaml, the InferencePool and
    token rate limit add-ons at v1.1.0), with the shared rate limiter's counters in the stack's Redis."""
    return {
        "config": {
            "envoyGateway": {
                "gateway": {"controllerName": CONTROLLER_NAME},
                "provider": {"type": "Kubernetes"},
                "extensionApis": {"enableEnvoyPatchPolicy": True, "enableBackend": True},
                "extensionManager": {
                    "backendResources": [
                        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "version": "v1"}
                    ],
                    "hooks": {
                        "xdsTranslator": {
                            "translation": {
                                "listener": {"includeAll": True},
                                "route": {"includeAll": True},
                                "cluster": {"includeAll": True},
                                "secret": {"includeAll": True},
                            },
                            "post": ["Translation", "Cluster", "Route"],
                        }
                    },
                    "service": {
                        "fqdn": {
                            "hostname": f"{AI_GATEWAY_CONTROLLER}.{AI_GATEWAY_NAMESPACE}.svc.cluster.local",
                            "port": AI_GATEWAY_EXTENSION_PORT,
                        }
                    },
                },
                "rateLimit": {"backend": {"type": "Redis", "redis": {"url": REDIS_URL}}},
            }
        },
        "deployment": {"replicas": 2, "pod": {"nodeSelector": system_pool}},
    }


def ai_gateway_values(system_pool: dict[str, str]) -> dict[str, Any]:
    return {
        "controller": {
            "fullnameOverride": AI_GATEWAY_CONTROLLER,
            "replicaCount": 2,
            "nodeSelector": system_pool,
            "podDisruptionBudget": {"enabled": True, "minAvailable": 1},
        }
    }


# The picker's config for a model that scales to zero: a key of the chart's ConfigMap beside its default one, named
# after its content. The picker reads its file at start only and the chart puts no checksum on the pod, so a new
# name (the --config-file argument) is what rolls the picker when the config changes.
FLOW_CONTROL_PREFIX = "flow-control"
# The chart's default scoring profile (epplib/templates/_config.yaml at v1.5.0): a custom file replaces the default
# one whole, so it repeats it.
SCORERS = (("queue-scorer", 2), ("kv-cache-utilization-scorer", 2), ("prefix-cache-scorer", 3))


def picker_config(model: ModelSpec) -> dict[str, Any]:
    """The EndpointPickerConfig of a model that scales to zero: the default scorers, and flow control, which holds
    each request while no replica can take it (no pod counts as saturated: v1.5.0's utilization detector answers
    1.0 for zero candidates) for up to holdSeconds, then answers 503; beyond maxHeldRequests held, 429."""
    zero = model.scale_to_zero
    assert zero is not None
    return {
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        "featureGates": ["flowControl"],
        "plugins": [{"type": name} for name, _ in SCORERS],
        "schedulingProfiles": [
            {"name": "default", "plugins": [{"pluginRef": name, "weight": weight} for name, weight in SCORERS]}
        ],
        "flowControl": {"maxRequests": str(zero.max_held_requests), "defaultRequestTTL": f"{zero.hold_seconds}s"},
    }


def inference_pool_values(model: ModelSpec) -> dict[str, Any]:
    """The model's servers as one pool, picked by the endpoint picker's default scorers (queue, KV cache, prefix
    cache; v1.5.0 reads vllm:kv_cache_usage_perc for vLLM, which both pinned engines export: the flag v1.0.2 needed
    for it makes v1.5.0 exit). Its metrics (port 9090) are read without a token by the stack's Prometheus, for the
    held requests a model at zero wakes on. A model that scales to zero gets flow control (picker_config)."""
    extension: dict[str, Any] = {
        "replicas": 1,  # the prefix-cache scorer's state lives in one picker
        # The chart asks 4 CPU and 8 GiB per picker (sized for high-QPS scale tests): one picker per model would
        # not fit the system pool. An estimate for this fleet's rates, which a real cluster's usage confirms.
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "4Gi"}},
        "monitoring": {"prometheus": {"auth": {"enabled": False}}},
    }
    if model.scale_to_zero is not None:
        text = yaml.safe_dump(picker_config(model), sort_keys=False)
        name = f"{FLOW_CONTROL_PREFIX}-{hashlib.sha256(text.encode()).hexdigest()[:8]}.yaml"
        extension["pluginsConfigFile"] = name
        extension["pluginsCustomConfig"] = {name: text}
    return {
        "inferencePool": {
            # The pods an InferencePool holds: the model's servers, by the Deployment's own selector.
            "modelServers": {"matchLabels": selector(model)},
            "targetPorts": [{"number": servers.PORT}],
            "modelServerType": "vllm",
        },
        "inferenceExtension": extension,
        "provider": {"name": "none"},
    }


def picker_name(model: ModelSpec) -> str:
    """The endpoint picker's Deployment, Service and pod label value (`<release>-epp`)."""
    return f"{model.name}-epp"


def external_secrets_values(
    system_pool: dict[str, str], account_annotations: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Scoped to the gateway's namespace: the controller watches it alone and its RBAC is a Role there, so it
    cannot read or write any other namespace's Secrets; no cluster-wide stores or secrets. No admission webhook
    and so no certificate controller, whose ClusterRole reads every Secret of the cluster (as the 2.9.0 chart
    renders it); without the webhook the CRDs convert nothing (the chart asks for both together), and a store
    or secret the webhook would have refused fails at reconcile instead, in its status. `account_annotations`:
    the cloud's identity for its service account (GKE's Workload Identity; EKS's Pod Identity needs none)."""
    account: dict[str, Any] = {"create": True, "name": SECRETS_ACCOUNT}
    if account_annotations:
        account["annotations"] = dict(account_annotations)
    return {
        "installCRDs": True,
        "scopedNamespace": GATEWAY_NAMESPACE,
        "scopedRBAC": True,
        "serviceAccount": account,
        "nodeSelector": system_pool,
        "webhook": {"create": False},
        "certController": {"create": False},
        "crds": {"conversion": {"enabled": False}},
        "processClusterStore": False,
        "processClusterExternalSecret": False,
        "processClusterPushSecret": False,
        "processPushSecret": False,
    }
