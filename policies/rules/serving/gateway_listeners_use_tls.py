"""Gateway listeners use TLS: every listener of a Gateway API Gateway is HTTPS or TLS, or serves plain HTTP only
behind a load balancer that ends TLS on its port with a certificate (the NLB's ssl-cert and ssl-ports on the
EnvoyProxy's Service, as mlinfra's front door on EKS does). An API key or a prompt sent in clear can be read
on the way.

Mandatory: callers' keys and data cross the internet.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.model import Finding, Stack, StackRule
from policies.readers.gateways import GATEWAY, envoy_proxy, listeners, proxy_service, tls_ended_in_front

NAME = "gateway-listeners-use-tls"


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    findings = []
    for gateway in stack.of_type(GATEWAY):
        service = proxy_service(envoy_proxy(stack, gateway))
        for listener in listeners(gateway):
            if listener.protocol in ("HTTPS", "TLS"):
                continue
            if listener.protocol == "HTTP" and tls_ended_in_front(service, listener.port):
                continue
            protocol = listener.protocol or "an unknown protocol"
            findings.append(
                Finding(
                    gateway.urn,
                    f"Gateway {gateway.label} listener {listener.name} serves {protocol} "
                    f"on port {listener.port} with nothing ending TLS in front of it, so API keys and prompts cross "
                    "the network in clear; make it HTTPS with a certificate, or end TLS at the load balancer (its "
                    "certificate and TLS port on the EnvoyProxy's Service, as mlinfra:serving.gateway does)",
                )
            )
    return findings


RULE = StackRule(
    NAME,
    "Gateway listeners use TLS: HTTPS or TLS, or plain HTTP only behind a load balancer that ends TLS on their port.",
    "mandatory",
    check,
)
