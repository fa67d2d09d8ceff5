"""Pinned Helm charts of the serving stack's front door and their values (pure), on either cloud.

Envoy AI Gateway v1.1.0 is built and tested against Envoy Gateway v1.8 (its go.mod: envoyproxy/gateway v1.8.1)
and the Gateway API Inference Extension v1.0.2 (its e2e suite installs that release's InferencePool manifests
and endpoint picker): the three move together. These charts stamp their version into Chart.yaml at release, so
their facts (tests/contracts/data/charts/) are extracted from the release tag with the published version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.serving import servers
from infra.serving.charts import Chart
from infra.serving.front_door import CONTROLLER_NAME, GATEWAY_NAMESPACE, REDIS_URL
from infra.serving.manifests import selector
from infra.serving.spec import ModelSpec

AI_GATEWAY_NAMESPACE = "envoy-ai-gateway-system"
AI_GATEWAY_CONTROLLER = "ai-gateway-controller"  # controller.fullnameOverride: its Service's name, which EG calls
AI_GATEWAY_EXTENSION_PORT = 1063  # the controller's extension server for Envoy Gateway (chart's service ports)
INFERENCE_EXTENSION_VERSION = "v1.0.2"
# The InferencePool and InferenceObjective CRDs of that release (the chart installs none; the endpoint picker
# watches both): the bundle AI Gateway v1.1.0's e2e suite applies (tests/internal/e2elib/e2elib.go).
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


def inference_pool_values(model: ModelSpec) -> dict[str, Any]:
    """The model's servers as one pool, picked by the endpoint picker's default scorers (queue, KV cache, prefix
    cache). EPP v1.0.2 reads KV-cache use from vllm:gpu_cache_usage_perc unless told: the engines pinned here
    (vLLM 0.16, 0.33) export vllm:kv_cache_usage_perc only, without which the KV scorer would score every
    replica alike."""
    return {
        "inferencePool": {
            # The pods an InferencePool holds: the model's servers, by the Deployment's own selector.
            "modelServers": {"matchLabels": selector(model)},
            "targetPorts": [{"number": servers.PORT}],
            "modelServerType": "vllm",
        },
        "inferenceExtension": {
            "replicas": 1,  # the prefix-cache scorer's state lives in one picker
            "flags": [{"name": "kv-cache-usage-percentage-metric", "value": "vllm:kv_cache_usage_perc"}],
        },
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
