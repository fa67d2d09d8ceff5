"""The serving stack's front door on either cloud: Envoy Gateway and Envoy AI Gateway, an InferencePool with its
endpoint picker per model, the route by model, API-key authentication, per-caller limits and the NetworkPolicy
that leaves the model servers to the gateway. The cloud's load balancer comes in as the proxies' Service."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.serving.helm_release import helm_release
from infra.serving import front_door, gateway_charts
from infra.serving.charts import SYSTEM_NODES
from infra.serving.gateway_spec import GatewaySpec
from infra.serving.images import ImageSource
from infra.serving.spec import ModelSpec


@dataclass(frozen=True)
class FrontDoorArgs:
    gateway: GatewaySpec | None  # None: no endpoint outside the cluster, the NetworkPolicy all the same
    models: Sequence[ModelSpec]
    namespace: str  # the model servers'
    envoy_service: Mapping[str, Any] = field(default_factory=dict)  # the cloud's load balancer (aws/, gcp/)
    after: Sequence[pulumi.Resource] = field(default_factory=list)  # the add-ons and the models' namespace
    servers: Sequence[pulumi.Resource] = field(default_factory=list)  # the model servers the pools select
    mirror: ImageSource | None = None  # the stack's image mirror, for the images declared here
    # External Secrets' store provider for the cloud's secret store (aws/, gcp/), the keys in it of the stored API
    # keys (auth api-key) and of the listener's certificate (TLS at the proxies: GKE), and what must exist before
    # External Secrets asks for credentials.
    key_store: Mapping[str, Any] | None = None
    api_keys_key: str | None = None
    tls_key: str | None = None
    key_reader: Sequence[pulumi.Resource] = field(default_factory=list)
    # Annotations of External Secrets' service account (GKE's Workload Identity names its Google account there).
    secrets_account_annotations: Mapping[str, Any] = field(default_factory=dict)


def _declare(name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.Resource:
    """A whole manifest as its typed resource (built-in kinds) or a CustomResource."""
    kind = manifest["kind"]
    metadata = manifest["metadata"]
    if kind == "NetworkPolicy":
        return k8s.networking.v1.NetworkPolicy(name, metadata=metadata, spec=manifest["spec"], opts=opts)
    if kind == "ClusterRole":
        return k8s.rbac.v1.ClusterRole(name, metadata=metadata, rules=manifest["rules"], opts=opts)
    if kind == "ClusterRoleBinding":
        return k8s.rbac.v1.ClusterRoleBinding(
            name, metadata=metadata, role_ref=manifest["roleRef"], subjects=manifest["subjects"], opts=opts
        )
    if kind == "Deployment":
        return k8s.apps.v1.Deployment(name, metadata=metadata, spec=manifest["spec"], opts=opts)
    if kind == "Service":
        return k8s.core.v1.Service(name, metadata=metadata, spec=manifest["spec"], opts=opts)
    body = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind", "metadata")}
    return k8s.apiextensions.CustomResource(
        name, api_version=manifest["apiVersion"], kind=kind, metadata=metadata, opts=opts, **body
    )


class FrontDoor(pulumi.ComponentResource):
    def __init__(self, name: str, args: FrontDoorArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:serving:FrontDoor", name, None, opts)
        after = list(args.after)
        child = pulumi.ResourceOptions(parent=self, depends_on=after)
        pickers = [gateway_charts.picker_name(model) for model in args.models]
        # Every model server refuses what is not the gateway, a picker or the scraper, with a gateway or without.
        _declare(
            f"{name}-model-servers-policy",
            front_door.model_server_network_policy(args.namespace, pickers),
            child,
        )
        self.endpoint: pulumi.Output[str] | None = None
        if args.gateway is None:
            self.register_outputs({})
            return

        # The InferencePool CRDs first: Envoy Gateway is ready only once it can list InferencePools.
        crds = k8s.yaml.v2.ConfigFile(
            f"{name}-inference-crds", file=gateway_charts.INFERENCE_EXTENSION_CRDS, opts=child
        )
        reader = [_declare(f"{name}-{m['kind'].lower()}", m, child) for m in front_door.inference_pool_reader()]
        envoy_gateway = helm_release(
            f"{name}-envoy-gateway",
            gateway_charts.ENVOY_GATEWAY,
            gateway_charts.envoy_gateway_values(SYSTEM_NODES),
            self,
            after + [crds, *reader],
        )
        # In the gateway's namespace, which the Envoy Gateway release creates.
        redis = [
            _declare(
                f"{name}-redis-{m['kind'].lower()}", m, pulumi.ResourceOptions(parent=self, depends_on=[envoy_gateway])
            )
            for m in front_door.redis_objects(SYSTEM_NODES, args.mirror)
        ]
        ai_crds = helm_release(f"{name}-ai-gateway-crds", gateway_charts.AI_GATEWAY_CRDS, {}, self, [envoy_gateway])
        ai_gateway = helm_release(
            f"{name}-ai-gateway",
            gateway_charts.AI_GATEWAY,
            gateway_charts.ai_gateway_values(SYSTEM_NODES),
            self,
            [ai_crds],
        )
        pools = [
            helm_release(
                f"{name}-pool-{model.name}",
                gateway_charts.inference_pool_chart(model, args.namespace),
                gateway_charts.inference_pool_values(model),
                self,
                [crds, *args.servers],
            )
            for model in args.models
        ]
        synced = self._synced_secrets(name, args, after, envoy_gateway)
        tls = synced.get(front_door.TLS_SECRET)
        on_gateway = pulumi.ResourceOptions(
            parent=self, depends_on=[envoy_gateway, ai_gateway, *redis, *synced.values()]
        )
        objects = [
            front_door.gateway_class(),
            front_door.envoy_proxy(args.envoy_service, SYSTEM_NODES),
            front_door.gateway(args.gateway, args.namespace, front_door.TLS_SECRET if tls else None),
            front_door.traffic_policy(args.gateway),
            front_door.client_traffic_policy(args.models),
        ]
        declared = [_declare(f"{name}-{m['kind'].lower()}", m, on_gateway) for m in objects]
        if args.gateway.auth == "api-key":
            if front_door.API_KEYS_SECRET not in synced:
                raise ValueError("auth api-key needs the cloud's key store and the API keys' key")
            declared.append(_declare(f"{name}-securitypolicy", front_door.security_policy(), on_gateway))
        _declare(
            f"{name}-route",
            front_door.ai_gateway_route(args.models, args.namespace),
            pulumi.ResourceOptions(parent=self, depends_on=[*declared, *pools]),
        )
        self.endpoint = pulumi.Output.from_input(f"https://{args.gateway.hostname}/v1")
        self.register_outputs({"endpoint": self.endpoint})

    def _synced_secrets(
        self, name: str, args: FrontDoorArgs, after: list[pulumi.Resource], envoy_gateway: pulumi.Resource
    ) -> dict[str, pulumi.Resource]:
        """External Secrets keeps the API keys' and the certificate's Secrets from the cloud's secret store (the
        API-key policy reads the first and fails closed until it exists): each ExternalSecret by its Secret's name."""
        secrets = []
        if args.gateway is not None and args.gateway.auth == "api-key" and args.api_keys_key is not None:
            secrets.append(front_door.api_keys_secret(args.api_keys_key))
        if args.tls_key is not None:
            secrets.append(front_door.tls_secret(args.tls_key))
        if not secrets:
            return {}
        if args.key_store is None:
            raise ValueError("secrets to sync need the cloud's key store")
        operator = helm_release(
            f"{name}-external-secrets",
            gateway_charts.EXTERNAL_SECRETS,
            gateway_charts.external_secrets_values(SYSTEM_NODES, args.secrets_account_annotations),
            self,
            # Scoped to the gateway's namespace (a Role there), which the Envoy Gateway release creates.
            [*after, *args.key_reader, envoy_gateway],
        )
        store, *externals = front_door.secret_sync(args.key_store, secrets)
        on_operator = pulumi.ResourceOptions(parent=self, depends_on=[operator, envoy_gateway])
        declared_store = _declare(f"{name}-secretstore", store, on_operator)
        on_store = pulumi.ResourceOptions(parent=self, depends_on=[operator, envoy_gateway, declared_store])
        return {m["metadata"]["name"]: _declare(f"{name}-externalsecret{_suffix(m)}", m, on_store) for m in externals}


def _suffix(external: dict[str, Any]) -> str:
    """The API keys' ExternalSecret keeps the name it had before the certificate's joined it."""
    secret = external["metadata"]["name"]
    return "" if secret == front_door.API_KEYS_SECRET else f"-{secret}"
