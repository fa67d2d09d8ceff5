"""Meaning checks both clouds' serving configs share (second tier): findings name the key and the fix."""

from __future__ import annotations

from infra.core.errors import Problem
from infra.serving.gateway_spec import GatewaySpec
from infra.serving.spec import EndpointSpec

ENDPOINT_KEY = "mlinfra:serving.cluster.endpoint"


def endpoint_findings(endpoint: EndpointSpec) -> list[Problem]:
    """The API endpoint's CIDR list fits its access mode (the same modes and messages on EKS and GKE)."""
    path = ENDPOINT_KEY + ".publicAccessCidrs"
    if endpoint.access == "restricted" and not endpoint.public_access_cidrs:
        return [
            Problem(
                path,
                "required with access restricted: the CIDRs allowed to reach the Kubernetes API "
                "(or use access private)",
            )
        ]
    if endpoint.access != "restricted" and endpoint.public_access_cidrs:
        return [
            Problem(
                path,
                f"only used with access restricted (access is {endpoint.access}); "
                "remove it or set cluster.endpoint.access to restricted",
            )
        ]
    return []


GATEWAY_KEY = "mlinfra:serving.gateway"


def gateway_findings(gateway: GatewaySpec) -> list[Problem]:
    """An endpoint without authentication is open only to named networks (the same rule on EKS and GKE)."""
    if gateway.auth == "none" and gateway.open_to_anyone:
        return [
            Problem(
                GATEWAY_KEY + ".sourceCidrs",
                "required with auth none, and not the whole internet: list the networks allowed to call the "
                "unauthenticated endpoint (mandatory policy unauthenticated-gateways-restrict-sources), or use "
                "auth api-key",
            )
        ]
    return []
