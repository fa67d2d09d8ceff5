"""The front door as `report` shows it (pure): what the preview declares, read with the policy pack's own readers
(policies/readers/gateways.py), so the comment and the checks see one thing: the endpoint, where TLS ends, who may
call, the limits, the models routed and whether the model servers accept the gateway only."""

from __future__ import annotations

from infra.core.shapes import dict_at
from infra.providers import tokens
from infra.tools.preview_json import PreviewDocument, as_stack
from policies.model import Resource, Stack
from policies.readers import gateways
from policies.readers.aws import as_list
from policies.readers.workloads import spec


def _limits(stack: Stack) -> list[str]:
    return [
        f"{rule.count} {'tokens' if rule.tokens else 'requests'}/{rule.unit.lower()}"
        for rule in gateways.rate_limits(stack)
    ]


def _synced_from(stack: Stack, secret: str, namespace: str) -> str | None:
    """The secret-store key External Secrets keeps a Secret from, if the stack declares that sync."""
    for external in stack.of_type(tokens.K8S_EXTERNAL_SECRET):
        body = spec(external)
        if (
            dict_at(body.get("target")).get("name") != secret
            or dict_at(external.get("metadata")).get("namespace") != namespace
        ):
            continue
        for source in as_list(body.get("dataFrom")):
            key = dict_at(dict_at(source).get("extract")).get("key")
            if isinstance(key, str):
                return key
    return None


def _listener_tls(stack: Stack, gateway: Resource, listener: gateways.Listener) -> str:
    namespace = str(dict_at(gateway.get("metadata")).get("namespace", "default"))
    named = []
    for secret in listener.certificates:
        source = _synced_from(stack, secret, namespace)
        named.append(f"`{secret}`" + (f" (kept from the secret store's `{source}`)" if source else ""))
    return "TLS at the listener" + (f" with {', '.join(named)}" if named else "")


def lines(document: PreviewDocument) -> list[str]:
    stack = as_stack(document)
    policies = stack.of_type(tokens.K8S_NETWORK_POLICY)
    isolation = (
        f"model servers admit the gateway, the pickers and the scraper only ({len(policies)} NetworkPolicy)"
        if policies
        else "**no NetworkPolicy: any pod in the cluster can call the model servers**"
    )
    out = ["#### Front door", ""]
    found = stack.of_type(gateways.GATEWAY)
    if not found:
        return out + [
            f"No gateway: nothing outside the cluster reaches the models (`mlinfra:serving.gateway`); {isolation}."
        ]
    for gateway in found:
        service = gateways.proxy_service(gateways.envoy_proxy(stack, gateway))
        cert, tls_policy = gateways.certificate(service)
        for listener in gateways.listeners(gateway):
            ended = listener.protocol in ("HTTPS", "TLS") or gateways.tls_ended_in_front(service, listener.port)
            endpoint = f"https://{listener.hostname}/v1" if ended and listener.hostname else "(no TLS endpoint)"
            tls = (
                f"TLS ended at the load balancer on {listener.port} with `{cert}` ({tls_policy or 'default policy'})"
                if cert and ended
                else (_listener_tls(stack, gateway, listener) if ended else "**no TLS**")
            )
            out.append(f"- `{endpoint}`: {tls}")
        auth = gateways.authentications(stack, gateway)
        ranges = [r for r in as_list(service.get("loadBalancerSourceRanges")) if isinstance(r, str)]
        sources = "internal only" if gateways.internal_only(service) else (", ".join(ranges) or "any address")
        out.append(f"- callers: {', '.join(auth) if auth else '**no authentication**'}; reachable from {sources}")
    limits = _limits(stack)
    out.append(f"- limits per caller: {', '.join(limits) if limits else 'none'}")
    models = gateways.routed_models(stack)
    out.append(f"- models routed by name: {', '.join(f'`{m}`' for m in models) if models else 'none'}")
    out.append(f"- {isolation}")
    return out
