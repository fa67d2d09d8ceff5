"""Model servers admit the gateway only: every model server's pods are selected by a NetworkPolicy limiting their
ingress, no policy selecting them admits any pod of the cluster (a rule without `from`, `namespaceSelector: {}`
alone, an ipBlock of the internet at large), and the stack's cluster enforces NetworkPolicies (EKS: the VPC CNI's
network policy agent; GKE: Dataplane V2 or its managed Calico). Otherwise any pod in the cluster can call, and
with vLLM's own unauthenticated API exhaust or crash, every model server past the gateway's keys and limits.

Mandatory: the gateway's authentication and limits mean nothing while its backends take calls from anyone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.model import Finding, Stack, StackRule
from policies.readers.network_policies import open_rules, selecting, unenforcing_clusters
from policies.readers.workloads import WORKLOADS, is_model_server, metadata, namespace_of, pod_labels

NAME = "model-servers-admit-the-gateway-only"
_FIX = (
    "declare a NetworkPolicy admitting only the gateway's proxies, the endpoint pickers and the metrics scraper "
    "(mlinfra's serving stacks declare model-servers)"
)


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    servers = [w for w in stack.of_type(*WORKLOADS) if is_model_server(w)]
    if not servers:
        return []
    findings = []
    for server in servers:
        policies = selecting(stack, namespace_of(metadata(server)), pod_labels(server))
        if not policies:
            findings.append(
                Finding(
                    server.urn,
                    f"model server {server.label}: no NetworkPolicy limits its pods' ingress, so any pod in the "
                    f"cluster can call it past the gateway; {_FIX}",
                )
            )
            continue
        for policy in policies:
            for reason in open_rules(policy):
                findings.append(
                    Finding(
                        policy.urn,
                        f"NetworkPolicy {policy.label} selects model server {server.label} and {reason}, so any "
                        f"pod in the cluster can call the server past the gateway; name the peers by namespace and "
                        "labels (the gateway's proxies, the pickers, the scraper)",
                    )
                )
    for cluster, needed in unenforcing_clusters(stack):
        findings.append(
            Finding(
                cluster.urn,
                f"cluster {cluster.label} enforces no NetworkPolicy, so the model servers' policies admit every pod; "
                f"enable {needed}",
            )
        )
    return findings


RULE = StackRule(
    NAME,
    "Model servers admit the gateway only: a NetworkPolicy limits their ingress to named peers, and the cluster "
    "enforces it.",
    "mandatory",
    check,
)
