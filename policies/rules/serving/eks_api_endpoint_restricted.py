"""The EKS API endpoint is private, or public only to listed networks (AWS's default is public to all)."""

from __future__ import annotations

from infra.core.network import public_reach
from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.aws import EKS_CLUSTER, as_list, is_anywhere, split_internet

NAME = "eks-api-endpoint-restricted"


def check(resource: Resource) -> list[str]:
    vpc = resource.get("vpcConfig")
    if is_unknown(vpc):
        return []
    vpc = vpc if isinstance(vpc, dict) else {}
    if vpc.get("endpointPublicAccess") is False:
        return []
    cidrs = as_list(vpc.get("publicAccessCidrs"))
    if not cidrs:
        return [
            "vpcConfig.endpointPublicAccess is on (AWS's default) with no publicAccessCidrs, so the Kubernetes "
            "API is open to the internet; set endpointPublicAccess false and endpointPrivateAccess true, or "
            "list the networks that may reach it in publicAccessCidrs"
        ]
    split = split_internet(cidrs)
    return [
        f"vpcConfig.publicAccessCidrs includes {c}; list only the networks that administer the cluster"
        for c in cidrs
        if is_anywhere(c)
    ] + (
        [
            f"vpcConfig.publicAccessCidrs {', '.join(split)} together admit {public_reach(split)}, the internet at "
            "large; list only the networks that administer the cluster"
        ]
        if split
        else []
    )


RULE = ResourceRule(
    NAME, "EKS API endpoints are private or limited to listed CIDRs.", "mandatory", (EKS_CLUSTER,), check
)
