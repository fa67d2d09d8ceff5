"""The serving stack's front door as Kubernetes objects (pure), whatever the cloud: Envoy Gateway's Gateway with
Envoy AI Gateway's route by the request's `model`, an InferencePool and endpoint picker per model, API-key
authentication, per-key limits, and the NetworkPolicies that leave the model servers reachable from the gateway,
the pickers and the metrics scraper only.

The route a request takes: client -> the cloud's load balancer (TLS, source networks) -> an Envoy proxy
(API key, limits; AI Gateway's external processor reads `model` from the body into a header) -> the model's
InferencePool, whose endpoint picker chooses the replica from the servers' own metrics -> vLLM on a device.
What each cloud adds (the load balancer's Service, the certificate) is in aws/ and gcp/.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infra.serving import servers
from infra.serving.gateway_spec import GatewaySpec
from infra.serving.images import ImageSource
from infra.serving.manifests import Manifest
from infra.serving.spec import ModelSpec

GATEWAY_NAMESPACE = "envoy-gateway-system"  # Envoy Gateway's own; the proxies it runs for a Gateway live there too
GATEWAY_CLASS = "mlinfra"
GATEWAY_NAME = "front-door"
CONTROLLER_NAME = "gateway.envoyproxy.io/gatewayclass-controller"
LISTENER_PORT = 443
# Labels Envoy Gateway puts on the proxy pods it runs (internal/infrastructure/kubernetes/proxy/resource.go).
PROXY_LABELS = {"app.kubernetes.io/name": "envoy", "app.kubernetes.io/component": "proxy"}
# The header AI Gateway's external processor writes the body's `model` into, which the route matches on.
MODEL_HEADER = "x-ai-eg-model"
# The header Envoy Gateway's API-key filter writes the caller's client name into; the limits count per value.
CLIENT_HEADER = "x-mlinfra-client"
API_KEYS_SECRET = "front-door-api-keys"
TLS_SECRET = "front-door-tls"  # the listener's certificate, where the proxies end TLS themselves (GKE)
# A key added or revoked, or a certificate renewed, in the secret store reaches the gateway within this.
SECRETS_REFRESH = "5m"
# Where AI Gateway writes a response's token usage, for the token limit's cost (AIGatewayRoute llmRequestCosts).
TOKEN_METADATA_NAMESPACE = "io.envoy.ai_gateway"
TOKEN_METADATA_KEY = "llm_total_token"
# The shared rate limiter's counters (Envoy Gateway's rate limit service keeps them in Redis): one small
# in-cluster Redis, whose loss resets the current minute's counts and nothing else.
REDIS_NAME = "rate-limit-redis"
REDIS_IMAGE = "docker.io/library/redis:7.4.2-alpine"
REDIS_PORT = 6379
REDIS_URL = f"{REDIS_NAME}.{GATEWAY_NAMESPACE}.svc.cluster.local:{REDIS_PORT}"
# The endpoint pickers' pod label as the inferencepool chart renders it (`inferencepool: <release>-epp`).
PICKER_LABEL = "inferencepool"
PROMETHEUS_NAMESPACE = "monitoring"
PROMETHEUS_LABELS = {"app.kubernetes.io/name": "prometheus", "app.kubernetes.io/component": "server"}


def _namespace_selector(name: str) -> dict[str, Any]:
    return {"matchLabels": {"kubernetes.io/metadata.name": name}}


def gateway_class() -> Manifest:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": GATEWAY_CLASS},
        "spec": {"controllerName": CONTROLLER_NAME},
    }


def envoy_proxy(service: Mapping[str, Any], system_pool: Mapping[str, str], replicas: int = 2) -> Manifest:
    """How Envoy Gateway runs the Gateway's proxies: behind the cloud's load balancer (`service`, from aws/ or
    gcp/), on the system nodes, two of them and a disruption budget so a drain never takes the endpoint."""
    return {
        "apiVersion": "gateway.envoyproxy.io/v1alpha1",
        "kind": "EnvoyProxy",
        "metadata": {"name": GATEWAY_NAME, "namespace": GATEWAY_NAMESPACE},
        "spec": {
            "provider": {
                "type": "Kubernetes",
                "kubernetes": {
                    "envoyService": dict(service),
                    "envoyDeployment": {
                        "replicas": replicas,
                        "pod": {"nodeSelector": dict(system_pool)},
                        "container": {"resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}},
                    },
                    "envoyPDB": {"minAvailable": 1},
                },
            }
        },
    }


def gateway(spec: GatewaySpec, route_namespace: str, tls_secret: str | None = None) -> Manifest:
    """One listener on 443 for the stack's hostname. `tls_secret` None: TLS ends at the cloud's load balancer in
    front (its certificate is the cloud's, as on EKS), which forwards the decrypted request inside the network to
    a plain HTTP listener. Named: the listener is HTTPS and ends TLS itself with that Secret's certificate (behind
    a passthrough load balancer, as on GKE); Envoy Gateway's default minimum, TLS 1.2, applies."""
    listener: dict[str, Any] = {
        "name": "api",
        "protocol": "HTTP" if tls_secret is None else "HTTPS",
        "port": LISTENER_PORT,
        "hostname": spec.hostname,
        "allowedRoutes": {"namespaces": {"from": "Selector", "selector": _namespace_selector(route_namespace)}},
    }
    if tls_secret is not None:
        listener["tls"] = {
            "mode": "Terminate",
            "certificateRefs": [{"group": "", "kind": "Secret", "name": tls_secret}],
        }
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": GATEWAY_NAME, "namespace": GATEWAY_NAMESPACE},
        "spec": {
            "gatewayClassName": GATEWAY_CLASS,
            "infrastructure": {
                "parametersRef": {"group": "gateway.envoyproxy.io", "kind": "EnvoyProxy", "name": GATEWAY_NAME}
            },
            "listeners": [listener],
        },
    }


def pool_name(model: ModelSpec) -> str:
    return model.name  # the InferencePool the inferencepool chart names after its release


def request_timeout_seconds(model: ModelSpec) -> int:
    """The route's whole-request timeout: the longest run, and the hold before it for a model at zero."""
    hold = model.scale_to_zero.hold_seconds if model.scale_to_zero is not None else 0
    return model.max_request_seconds + hold


def ai_gateway_route(models: Sequence[ModelSpec], ns: str) -> Manifest:
    """One rule per model: the request's `model` (the name the server answers to, --served-model-name) picks
    the model's InferencePool. A name no rule has gets AI Gateway's 404. The rules are what AI Gateway lists at
    /v1/models, so a model at zero stays listed. A request's time runs from its arrival: a model at zero gives it
    its hold on top of its longest run."""
    return {
        "apiVersion": "aigateway.envoyproxy.io/v1beta1",
        "kind": "AIGatewayRoute",
        "metadata": {"name": GATEWAY_NAME, "namespace": ns},
        "spec": {
            "parentRefs": [
                {
                    "group": "gateway.networking.k8s.io",
                    "kind": "Gateway",
                    "name": GATEWAY_NAME,
                    "namespace": GATEWAY_NAMESPACE,
                }
            ],
            "rules": [
                {
                    "matches": [{"headers": [{"type": "Exact", "name": MODEL_HEADER, "value": model.name}]}],
                    "backendRefs": [
                        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": pool_name(model)}
                    ],
                    "timeouts": {"request": f"{request_timeout_seconds(model)}s"},
                }
                for model in models
            ],
            "llmRequestCosts": [{"metadataKey": TOKEN_METADATA_KEY, "type": "TotalToken"}],
        },
    }


def _gateway_target() -> list[dict[str, str]]:
    return [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": GATEWAY_NAME}]


def security_policy() -> Manifest:
    """API keys (the Secret synced from the cloud's secret store: one key per client name), read from
    `Authorization: Bearer <key>` as OpenAI's clients send it, removed before the request goes on; the
    client's name travels in its place for the limits."""
    return {
        "apiVersion": "gateway.envoyproxy.io/v1alpha1",
        "kind": "SecurityPolicy",
        "metadata": {"name": GATEWAY_NAME, "namespace": GATEWAY_NAMESPACE},
        "spec": {
            "targetRefs": _gateway_target(),
            "apiKeyAuth": {
                "credentialRefs": [{"group": "", "kind": "Secret", "name": API_KEYS_SECRET}],
                "extractFrom": [{"headers": ["Authorization"]}],
                "forwardClientIDHeader": CLIENT_HEADER,
                "sanitize": True,
            },
        },
    }


@dataclass(frozen=True)
class SyncedSecret:
    """A Secret External Secrets keeps from the cloud's secret store: each entry of the stored JSON object at
    `remote_key` becomes one key of the Secret `name` (of `type`, e.g. kubernetes.io/tls; None: Opaque)."""

    name: str
    remote_key: str
    type: str | None = None


def api_keys_secret(remote_key: str) -> SyncedSecret:
    return SyncedSecret(API_KEYS_SECRET, remote_key)


def tls_secret(remote_key: str) -> SyncedSecret:
    """The listener's certificate: the stored object's `tls.crt` and `tls.key` become a kubernetes.io/tls Secret."""
    return SyncedSecret(TLS_SECRET, remote_key, "kubernetes.io/tls")


def secret_sync(provider: Mapping[str, Any], secrets: Sequence[SyncedSecret]) -> list[Manifest]:
    """A SecretStore of `provider` (the cloud's secret store: aws/, gcp/) and an ExternalSecret per Secret."""
    store = f"{GATEWAY_NAME}-keys"
    manifests: list[Manifest] = [
        {
            "apiVersion": "external-secrets.io/v1",
            "kind": "SecretStore",
            "metadata": {"name": store, "namespace": GATEWAY_NAMESPACE},
            "spec": {"provider": dict(provider)},
        }
    ]
    for secret in secrets:
        target: dict[str, Any] = {"name": secret.name, "creationPolicy": "Owner", "deletionPolicy": "Retain"}
        if secret.type is not None:
            target["template"] = {"type": secret.type}  # no data template: the stored entries, as they are
        manifests.append(
            {
                "apiVersion": "external-secrets.io/v1",
                "kind": "ExternalSecret",
                "metadata": {"name": secret.name, "namespace": GATEWAY_NAMESPACE},
                "spec": {
                    "refreshInterval": SECRETS_REFRESH,
                    "secretStoreRef": {"name": store, "kind": "SecretStore"},
                    "target": target,
                    "dataFrom": [{"extract": {"key": secret.remote_key}}],
                },
            }
        )
    return manifests


# Bytes of a request body per token of context, generously (JSON text, escapes, the request's other fields).
BODY_BYTES_PER_TOKEN = 16
MIN_BODY_MIB = 4


def body_limit_mib(models: Sequence[ModelSpec]) -> int:
    """The largest request body the proxies buffer, MiB: room for the longest context any model serves. AI
    Gateway reads the whole body to route it; Envoy Gateway's default buffer (32 KiB) would refuse long prompts
    with 413, and an unbounded one would let anyone make the proxies hold large bodies before authentication."""
    longest = max(model.max_model_len for model in models)
    return max(MIN_BODY_MIB, -(-longest * BODY_BYTES_PER_TOKEN // 2**20))


def client_traffic_policy(models: Sequence[ModelSpec]) -> Manifest:
    return {
        "apiVersion": "gateway.envoyproxy.io/v1alpha1",
        "kind": "ClientTrafficPolicy",
        "metadata": {"name": GATEWAY_NAME, "namespace": GATEWAY_NAMESPACE},
        "spec": {"targetRefs": _gateway_target(), "connection": {"bufferLimit": f"{body_limit_mib(models)}Mi"}},
    }


def _caller(spec: GatewaySpec) -> dict[str, Any]:
    """Who a limit counts: each client name, or without auth each source address."""
    if spec.auth == "api-key":
        return {"headers": [{"name": CLIENT_HEADER, "type": "Distinct"}]}
    return {"sourceCIDR": {"type": "Distinct", "value": "0.0.0.0/0"}}


# What the gateway itself answers, in OpenAI's error shape so clients report it as they would OpenAI's: a model no
# route has (AI Gateway's plain-text 404), a missing or unknown key (Envoy's 401), a limit reached (429) and a
# request the endpoint picker could not place (503: held past its hold while a model at zero starts, or no replica).
# Whether Envoy counts the picker's immediate response (ext_proc) as its own local reply, as it does a filter's, a real
# cluster confirms: if not, that 503 reaches the client plain, without Retry-After.
OPENAI_ERRORS = {
    401: (
        "Invalid or missing API key: send it as 'Authorization: Bearer <key>'.",
        "invalid_request_error",
        "invalid_api_key",
    ),
    404: (
        "The model does not exist or is not served here (GET /v1/models lists the models).",
        "invalid_request_error",
        "model_not_found",
    ),
    429: ("Rate limit reached for this API key; retry after the current minute.", "requests", "rate_limit_exceeded"),
    503: (
        "The model is starting (it scales to zero without traffic) or cannot take the request now; retry after "
        "the Retry-After seconds.",
        "server_error",
        "model_unavailable",
    ),
}
# What a 503 of the gateway's own asks the client to wait: a model at zero holds each request in its picker's queue
# up to scaleToZero.holdSeconds, so a client back within this is held again while the replica starts (the OpenAI
# SDKs retry a 503, honouring Retry-After up to 60 s).
RETRY_AFTER_SECONDS = 30


def _openai_error(status: int) -> dict[str, Any]:
    message, kind, code = OPENAI_ERRORS[status]
    body = json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}})
    return {
        "match": {"statusCodes": [{"type": "Value", "value": status}]},
        "source": "Local",  # only what Envoy answers itself, never a model server's own response
        "response": {
            "contentType": "application/json",
            "body": {"type": "Inline", "inline": body},
            **(
                {"header": {"set": [{"name": "Retry-After", "value": str(RETRY_AFTER_SECONDS)}]}}
                if status == 503
                else {}
            ),
        },
    }


def traffic_policy(spec: GatewaySpec) -> Manifest:
    """Per-caller limits in the shared (global) rate limiter, so every proxy replica counts against one budget:
    requests per minute, and tokens per minute costed from each response's usage (nothing at request time); and
    the gateway's own answers in OpenAI's error shape."""
    rules: list[dict[str, Any]] = [
        {
            "clientSelectors": [_caller(spec)],
            "limit": {"requests": spec.rate_limits.requests_per_minute, "unit": "Minute"},
            "shared": True,  # one count per caller over the Gateway, not one per route
        }
    ]
    if spec.rate_limits.tokens_per_minute is not None:
        rules.append(
            {
                "clientSelectors": [_caller(spec)],
                "limit": {"requests": spec.rate_limits.tokens_per_minute, "unit": "Minute"},
                "shared": True,
                "cost": {
                    "request": {"from": "Number", "number": 0},
                    "response": {
                        "from": "Metadata",
                        "metadata": {"namespace": TOKEN_METADATA_NAMESPACE, "key": TOKEN_METADATA_KEY},
                    },
                },
            }
        )
    return {
        "apiVersion": "gateway.envoyproxy.io/v1alpha1",
        "kind": "BackendTrafficPolicy",
        "metadata": {"name": GATEWAY_NAME, "namespace": GATEWAY_NAMESPACE},
        # `global` alone (rateLimit.type is deprecated in Envoy Gateway 1.8).
        "spec": {
            "targetRefs": _gateway_target(),
            "rateLimit": {"global": {"rules": rules}},
            "responseOverride": [_openai_error(status) for status in sorted(OPENAI_ERRORS)],
        },
    }


def model_server_network_policy(ns: str, pickers: Sequence[str]) -> Manifest:
    """Model servers accept connections from the gateway's proxies, the endpoint pickers (their metrics) and the
    metrics scraper, on the server's port only; any other pod, in any namespace, is refused. `pickers`: the
    endpoint pickers' names (without models no picker may: the list is never empty for the API server)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "model-servers", "namespace": ns},
        "spec": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "model-server"}},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [
                        {
                            "namespaceSelector": _namespace_selector(GATEWAY_NAMESPACE),
                            "podSelector": {"matchLabels": dict(PROXY_LABELS)},
                        },
                        {
                            "podSelector": {
                                "matchExpressions": [{"key": PICKER_LABEL, "operator": "In", "values": sorted(pickers)}]
                            }
                        },
                        {
                            "namespaceSelector": _namespace_selector(PROMETHEUS_NAMESPACE),
                            "podSelector": {"matchLabels": dict(PROMETHEUS_LABELS)},
                        },
                    ],
                    "ports": [{"protocol": "TCP", "port": servers.PORT}],
                }
            ],
        },
    }


ENVOY_GATEWAY_ACCOUNT = "envoy-gateway"  # the controller's service account (gateway-helm: a fixed name)


def inference_pool_reader() -> list[Manifest]:
    """Envoy Gateway watches InferencePools as an extension backend, and reports ready only once it can list
    them; its chart grants no such right (AI Gateway's chart does, but is installed after it): granted here."""
    name = "mlinfra-envoy-gateway-inference-pools"
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": [
                {
                    "apiGroups": ["inference.networking.k8s.io"],
                    "resources": ["inferencepools"],
                    "verbs": ["get", "list", "watch"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": ENVOY_GATEWAY_ACCOUNT, "namespace": GATEWAY_NAMESPACE}],
        },
    ]


def redis_objects(system_pool: Mapping[str, str], mirror: ImageSource | None = None) -> list[Manifest]:
    """Deployment and Service of the rate limiter's Redis: no persistence (counters live a minute); its image
    through the stack's mirror where it has one."""
    labels = {"app.kubernetes.io/name": REDIS_NAME, "app.kubernetes.io/managed-by": "mlinfra"}
    metadata = {"name": REDIS_NAME, "namespace": GATEWAY_NAMESPACE, "labels": labels}
    container = {
        "name": "redis",
        "image": mirror.image(REDIS_IMAGE) if mirror else REDIS_IMAGE,
        "args": ["--save", "", "--appendonly", "no"],
        "ports": [{"name": "redis", "containerPort": REDIS_PORT, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "readinessProbe": {"tcpSocket": {"port": REDIS_PORT}, "periodSeconds": 5},
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": 999},
    }
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": metadata,
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"nodeSelector": dict(system_pool), "containers": [container]},
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": metadata,
            "spec": {
                "type": "ClusterIP",
                "selector": labels,
                "ports": [{"name": "redis", "port": REDIS_PORT, "targetPort": "redis", "protocol": "TCP"}],
            },
        },
    ]
