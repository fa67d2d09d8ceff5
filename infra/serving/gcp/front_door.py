"""What GKE adds to the front door (pure): an external passthrough Network Load Balancer in front of the gateway's
proxies, which end TLS themselves with the certificate kept in Secret Manager, and External Secrets reading
Secret Manager as its own Google service account (Workload Identity).

Facts (GKE's "LoadBalancer Service parameters" and "backend service-based external load balancer" pages, read
2026-12-04): `cloud.google.com/l4-rbs: "enabled"` makes a backend service-based external passthrough NLB (GKE
1.25.5+; GCE_VM_IP NEG backends from 1.32.2-gke.1652000, and it needs the HttpLoadBalancing add-on, on by default);
`externalTrafficPolicy: Local` passes only the nodes running a proxy in the health check and keeps the client's
address; `loadBalancerSourceRanges` become the VPC firewall rule GKE makes for the load balancer (0.0.0.0/0
when empty). A passthrough load balancer does not end TLS: the listener does (infra/serving/front_door.py).
"""

from __future__ import annotations

from typing import Any

from infra.serving.gcp.config import GcpGatewaySpec

L4_BACKEND_SERVICE = "cloud.google.com/l4-rbs"
INTERNAL = "networking.gke.io/load-balancer-type"  # "Internal": an internal passthrough load balancer instead
# External Secrets reads only the gateway's secrets: their own accessor grants, never a project-wide role.
SECRET_ACCESSOR = "roles/secretmanager.secretAccessor"


def envoy_service(gateway: GcpGatewaySpec) -> dict[str, Any]:
    """The proxies' Service as Envoy Gateway creates it (EnvoyProxy envoyService): an external passthrough NLB of
    a regional backend service, to the nodes that run a proxy, the callers' addresses kept (the per-address
    limits with auth none count callers, not nodes)."""
    service: dict[str, Any] = {
        "type": "LoadBalancer",
        "externalTrafficPolicy": "Local",
        "annotations": {L4_BACKEND_SERVICE: "enabled"},
    }
    if gateway.source_cidrs:
        service["loadBalancerSourceRanges"] = list(gateway.source_cidrs)
    return service


def secret_store_provider(project: str) -> dict[str, Any]:
    """External Secrets' Secret Manager provider in the stack's project, with the controller's own credentials
    (no `auth` block: Google's default credentials, which Workload Identity gives the annotated service account),
    so no key file is kept anywhere."""
    return {"gcpsm": {"projectID": project}}


def secret_id(name: str) -> str:
    """projects/<p>/secrets/<id> -> <id>: the key External Secrets asks Secret Manager for, in its project."""
    return name.rsplit("/", 1)[-1]
