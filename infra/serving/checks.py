"""Meaning checks both clouds' serving configs share (second tier): findings name the key and the fix."""

from __future__ import annotations

from infra.core.errors import Problem
from infra.serving.gateway_spec import GatewaySpec
from infra.serving.spec import EndpointSpec, ModelSpec

ENDPOINT_KEY = "mlinfra:serving.cluster.endpoint"


def replica_bound_findings(where: str, model: ModelSpec) -> list[Problem]:
    """maxReplicas holds the minimum and every schedule window's minimum (`where` ends in ".")."""
    low = model.scheduled_peak
    if model.max_replicas >= low:
        return []
    what = "the schedule's largest minimum" if model.schedule else "minReplicas"
    return [Problem(where + "maxReplicas", f"{model.max_replicas} is below {what} ({low}); use at least {low}")]


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


def gateway_findings(gateway: GatewaySpec, keys_field: str, keys: str | None, store: str) -> list[Problem]:
    """An endpoint without authentication is open only to named networks, and the API keys' secret (`keys`, at
    `keys_field` of the cloud's gateway config, in the cloud's secret `store`) is named exactly when auth is
    api-key (the same rules on EKS and GKE)."""
    findings = []
    if gateway.auth == "none" and gateway.open_to_anyone:
        findings.append(
            Problem(
                GATEWAY_KEY + ".sourceCidrs",
                "required with auth none, and not the whole internet: list the networks allowed to call the "
                "unauthenticated endpoint (mandatory policy unauthenticated-gateways-restrict-sources), or use "
                "auth api-key",
            )
        )
    path = f"{GATEWAY_KEY}.{keys_field}"
    if gateway.auth == "api-key" and keys is None:
        findings.append(Problem(path, f"required with auth api-key: the {store} secret holding the clients' API keys"))
    if gateway.auth == "none" and keys is not None:
        findings.append(Problem(path, "only used with auth api-key (auth is none); remove it or set auth api-key"))
    return findings
