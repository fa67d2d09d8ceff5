"""Unauthenticated gateways restrict sources: a Gateway no SecurityPolicy authenticates (API key, basic auth,
JWT, OIDC, external auth) is reachable only from named networks: its proxies' load balancer is internal, or lists
source ranges that do not cover the internet. Anyone who finds an open, unauthenticated model endpoint spends its
accelerators. A SecurityPolicy on one of the Gateway's routes that identifies no caller counts as none for that
route: Envoy Gateway applies the most specific policy, so it replaces the Gateway's authentication there.

Mandatory: mlinfra's config asks for `gateway.auth: none` by name and refuses it without `sourceCidrs`; this is the
same rule on the declared objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.model import Finding, Stack, StackRule
from policies.readers.gateways import (
    GATEWAY,
    authenticated,
    envoy_proxy,
    internal_only,
    open_to_anyone,
    proxy_service,
    unauthenticated_routes,
)

NAME = "unauthenticated-gateways-restrict-sources"


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    findings = []
    for gateway in stack.of_type(GATEWAY):
        service = proxy_service(envoy_proxy(stack, gateway))
        if internal_only(service) or not open_to_anyone(service):
            continue
        if not authenticated(stack, gateway):
            findings.append(
                Finding(
                    gateway.urn,
                    f"Gateway {gateway.label} authenticates no caller and its load balancer takes connections from "
                    "any address, so anyone who finds it can spend the models' accelerators; authenticate callers (a "
                    "SecurityPolicy with apiKeyAuth, or mlinfra:serving.gateway.auth api-key) or list the allowed "
                    "networks in loadBalancerSourceRanges (gateway.sourceCidrs)",
                )
            )
            continue
        for policy, route in unauthenticated_routes(stack, gateway):
            findings.append(
                Finding(
                    policy.urn,
                    f"SecurityPolicy {policy.label} on route {route.label} of Gateway {gateway.label} identifies no "
                    "caller, and Envoy Gateway applies it in place of the Gateway's authentication, so that route is "
                    "open to any address; add the Gateway's authentication to it (apiKeyAuth) or remove it",
                )
            )
    return findings


RULE = StackRule(
    NAME,
    "Gateways without authentication are reachable only from named networks (internal, or source ranges).",
    "mandatory",
    check,
)
