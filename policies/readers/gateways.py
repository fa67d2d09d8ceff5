"""Reading a stack's front door as rules need it (pure): Gateway API Gateways, the Envoy Gateway EnvoyProxy that
shapes their proxies' Service (its load balancer's TLS and source ranges), and the SecurityPolicies that
authenticate their callers.

Inputs arrive as the manifests' own camelCase fields, for built-in kinds and custom resources alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.core.network import covers_internet
from infra.core.shapes import dict_at
from infra.providers import tokens
from infra.serving.front_door import MODEL_HEADER
from policies.model import Resource, Stack, is_unknown
from policies.readers.aws import as_list
from policies.readers.workloads import metadata, namespace_of, spec

GATEWAY = tokens.K8S_GATEWAY
ENVOY_PROXY = tokens.K8S_ENVOY_PROXY
SECURITY_POLICY = tokens.K8S_ENVOY_SECURITY_POLICY
TRAFFIC_POLICY = tokens.K8S_ENVOY_BACKEND_TRAFFIC_POLICY
# Routes that attach to a Gateway: Gateway API's own, and AI Gateway's, which becomes an HTTPRoute of its name.
AI_ROUTE = tokens.K8S_AI_GATEWAY_ROUTE
ROUTES = (tokens.K8S_HTTP_ROUTE, AI_ROUTE)
# The AWS Load Balancer Controller's TLS annotations (docs/guide/service/annotations.md, v3.5.0).
_AWS = "service.beta.kubernetes.io/aws-load-balancer-"
# SecurityPolicy fields that identify a caller (Envoy Gateway 1.8); authorization alone does not.
AUTHENTICATIONS = ("apiKeyAuth", "basicAuth", "jwt", "oidc", "extAuth")


@dataclass(frozen=True)
class Listener:
    name: str
    protocol: str
    port: int | None
    hostname: str | None = None
    certificates: tuple[str, ...] = ()  # the Secrets an HTTPS or TLS listener ends TLS with


def listeners(gateway: Resource) -> list[Listener]:
    found = []
    for item in as_list(spec(gateway).get("listeners")):
        item = dict_at(item)
        port = item.get("port")  # a number through the engine's protobuf values: 443.0
        number = int(port) if isinstance(port, (int, float)) and float(port).is_integer() else None
        host = item.get("hostname")
        refs = [dict_at(ref) for ref in as_list(dict_at(item.get("tls")).get("certificateRefs"))]
        found.append(
            Listener(
                str(item.get("name", "?")),
                str(item.get("protocol", "")),
                number,
                host if isinstance(host, str) and not is_unknown(host) else None,
                tuple(str(ref["name"]) for ref in refs if ref.get("kind", "Secret") == "Secret" and "name" in ref),
            )
        )
    return found


def envoy_proxy(stack: Stack, gateway: Resource) -> Resource | None:
    """The EnvoyProxy a Gateway names in spec.infrastructure.parametersRef (same namespace), if the stack has it."""
    ref = dict_at(dict_at(spec(gateway).get("infrastructure")).get("parametersRef"))
    if ref.get("kind") != "EnvoyProxy":
        return None
    namespace = namespace_of(metadata(gateway))
    for proxy in stack.of_type(ENVOY_PROXY):
        meta = metadata(proxy)
        if meta.get("name") == ref.get("name") and namespace_of(meta) == namespace:
            return proxy
    return None


def proxy_service(proxy: Resource | None) -> dict:
    """The EnvoyProxy's spec.provider.kubernetes.envoyService."""
    if proxy is None:
        return {}
    return dict_at(dict_at(dict_at(spec(proxy).get("provider")).get("kubernetes")).get("envoyService"))


def tls_ended_in_front(service: dict, port: int | None) -> bool:
    """The cloud's load balancer ends TLS on `port` before the listener: an NLB with a certificate on it."""
    annotations = dict_at(service.get("annotations"))
    certificate = annotations.get(f"{_AWS}ssl-cert")
    ports = annotations.get(f"{_AWS}ssl-ports")
    if not certificate or port is None:
        return False
    if is_unknown(certificate) or is_unknown(ports):
        return True  # computed at preview: the annotation is there, its value comes later
    named = {p.strip() for p in str(ports or "*").split(",")}
    return "*" in named or str(port) in named


# GKE's internal passthrough load balancer, by annotation or by class (GKE's "LoadBalancer Service parameters").
_GKE_INTERNAL = ("networking.gke.io/load-balancer-type", "Internal")
_GKE_INTERNAL_CLASS = "networking.gke.io/l4-regional-internal"


def internal_only(service: dict) -> bool:
    """The proxies are reachable inside the network only: a ClusterIP Service, a load balancer of scheme internal
    (the AWS Load Balancer Controller's default for its own class when no scheme is named), or GKE's internal
    passthrough load balancer."""
    kind = service.get("type", "LoadBalancer")  # Envoy Gateway's default
    if kind == "ClusterIP":
        return True
    if kind != "LoadBalancer":
        return False
    annotations = dict_at(service.get("annotations"))
    if annotations.get(_GKE_INTERNAL[0]) == _GKE_INTERNAL[1] or service.get("loadBalancerClass") == _GKE_INTERNAL_CLASS:
        return True
    scheme = annotations.get(f"{_AWS}scheme")
    if scheme is not None:
        return scheme == "internal"
    return service.get("loadBalancerClass") == "service.k8s.aws/nlb"


def open_to_anyone(service: dict) -> bool:
    """No source ranges, or ranges that admit the internet at large (the load balancer's default is 0.0.0.0/0)."""
    ranges = [r for r in as_list(service.get("loadBalancerSourceRanges")) if isinstance(r, str)]
    return not ranges or covers_internet(ranges)


def authenticated(stack: Stack, gateway: Resource) -> bool:
    """Some SecurityPolicy in the Gateway's namespace targets it and identifies callers."""
    return bool(authentications(stack, gateway))


def authentications(stack: Stack, gateway: Resource) -> list[str]:
    """The ways callers are identified at the Gateway (apiKeyAuth, jwt, ...), by the SecurityPolicies targeting it."""
    found: list[str] = []
    meta = metadata(gateway)
    name, namespace = meta.get("name"), namespace_of(meta)
    for policy in stack.of_type(SECURITY_POLICY):
        if namespace_of(metadata(policy)) != namespace:
            continue
        body = spec(policy)
        if any(t.get("kind") == "Gateway" and t.get("name") == name for t in _targets(policy)):
            found += [field for field in AUTHENTICATIONS if body.get(field) and field not in found]
    return found


def certificate(service: dict) -> tuple[str | None, str | None]:
    """The load balancer's certificate and TLS policy, as the Service's annotations name them."""
    annotations = dict_at(service.get("annotations"))
    cert, policy = annotations.get(f"{_AWS}ssl-cert"), annotations.get(f"{_AWS}ssl-negotiation-policy")
    return (cert if isinstance(cert, str) else None), (policy if isinstance(policy, str) else None)


def _targets(policy: Resource) -> list[dict]:
    body = spec(policy)
    return [dict_at(t) for t in as_list(body.get("targetRefs")) + as_list(body.get("targetRef"))]


def unauthenticated_routes(stack: Stack, gateway: Resource) -> list[tuple[Resource, Resource]]:
    """(SecurityPolicy, route) pairs where a policy on one of the Gateway's routes identifies no caller: Envoy Gateway
    applies the most specific SecurityPolicy, so it replaces the Gateway's authentication on that route."""
    meta = metadata(gateway)
    name, namespace = meta.get("name"), namespace_of(meta)
    attached = []
    for route in stack.of_type(*ROUTES):
        route_namespace = namespace_of(metadata(route))
        for parent in as_list(spec(route).get("parentRefs")):
            parent = dict_at(parent)
            if parent.get("name") == name and parent.get("namespace", route_namespace) == namespace:
                attached.append(route)
                break
    found = []
    for policy in stack.of_type(SECURITY_POLICY):
        policy_namespace = namespace_of(metadata(policy))
        body = spec(policy)
        if any(body.get(field) for field in AUTHENTICATIONS):
            continue
        for target in _targets(policy):
            if target.get("kind") != "HTTPRoute":
                continue
            for route in attached:
                route_meta = metadata(route)
                if route_meta.get("name") == target.get("name") and namespace_of(route_meta) == policy_namespace:
                    found.append((policy, route))
    return found


@dataclass(frozen=True)
class RateLimit:
    """One global rate-limit rule of a BackendTrafficPolicy."""

    count: int
    unit: str  # Envoy Gateway's: Second, Minute, Hour, Day, Month, Year
    tokens: bool  # costed from the response's token usage (AI Gateway's metadata), not one per request


def rate_limits(stack: Stack) -> list[RateLimit]:
    """The stack's global rate-limit rules, in order, each with a numeric count."""
    found = []
    for policy in stack.of_type(TRAFFIC_POLICY):
        for rule in as_list(dict_at(dict_at(spec(policy).get("rateLimit")).get("global")).get("rules")):
            rule = dict_at(rule)
            limit = dict_at(rule.get("limit"))
            count = limit.get("requests")  # a number through the engine's protobuf values: 600.0
            if isinstance(count, (int, float)) and not isinstance(count, bool):
                tokens_ = bool(dict_at(rule.get("cost")).get("response"))
                found.append(RateLimit(int(count), str(limit.get("unit", "?")), tokens_))
    return found


def routed_models(stack: Stack) -> list[str]:
    """The model names the stack's AIGatewayRoutes route (their rules' matches on AI Gateway's model header)."""
    names = []
    for route in stack.of_type(AI_ROUTE):
        for rule in as_list(spec(route).get("rules")):
            for match in as_list(dict_at(rule).get("matches")):
                for header in as_list(dict_at(match).get("headers")):
                    value = dict_at(header).get("value")
                    if dict_at(header).get("name") == MODEL_HEADER and isinstance(value, str):
                        names.append(value)
    return sorted(set(names))
