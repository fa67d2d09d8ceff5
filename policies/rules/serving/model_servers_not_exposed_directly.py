"""Model servers not exposed directly: no Service of type LoadBalancer or NodePort selects a model server's pods.
Such a Service puts the server on the network past the gateway's TLS, authentication and limits (and vLLM's own
API has neither); the gateway, whose proxies reach the servers through their ClusterIP Services and pools, is the
one way in.

Mandatory: an exposed model server is an open, unauthenticated endpoint on accelerators.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.core.shapes import dict_at
from infra.providers import tokens
from policies.model import Finding, Stack, StackRule
from policies.readers.workloads import WORKLOADS, is_model_server, metadata, namespace_of, pod_labels, spec

NAME = "model-servers-not-exposed-directly"
_EXPOSED = ("LoadBalancer", "NodePort")


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    servers = [w for w in stack.of_type(*WORKLOADS) if is_model_server(w)]
    findings = []
    for service in stack.of_type(tokens.K8S_SERVICE):
        body = spec(service)
        kind = body.get("type", "ClusterIP")
        selector = dict_at(body.get("selector"))
        if kind not in _EXPOSED or not selector:
            continue
        namespace = namespace_of(metadata(service))
        for server in servers:
            labels = pod_labels(server)
            if namespace_of(metadata(server)) == namespace and all(labels.get(k) == v for k, v in selector.items()):
                findings.append(
                    Finding(
                        service.urn,
                        f"Service {service.label} ({kind}) sends traffic from outside the cluster straight to model "
                        f"server {server.label}, past the gateway's TLS, authentication and limits; make it a "
                        "ClusterIP Service and publish the model through the stack's gateway "
                        "(mlinfra:serving.gateway)",
                    )
                )
    return findings


RULE = StackRule(
    NAME,
    "No LoadBalancer or NodePort Service selects a model server: the gateway is the one way in.",
    "mandatory",
    check,
)
