"""Config of the `serving` stack kind on GCP (`mlinfra:cloud: gcp`): a private GKE cluster with an
autoscaled L4 (G2) node pool serving models read from the GCS bridge bucket of the registry."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from infra.core.naming import GCS_BUCKET_PATTERN, GcsBucketName, first_group
from infra.core.network import private_cidr
from infra.core.spec import Spec
from infra.serving.gateway_spec import GatewaySpec
from infra.serving.spec import EndpointSpec, ModelSpec

GKE_CHANNELS = ("RAPID", "REGULAR", "STABLE")


class GkeNetworkSpec(Spec):
    nodes_cidr: str = Field("10.90.0.0/20", description="Primary range of the node subnet.")
    pods_cidr: str = Field("10.96.0.0/14", description="Secondary range for pods (VPC-native cluster).")
    services_cidr: str = Field("10.100.0.0/20", description="Secondary range for services.")
    master_cidr: str = Field("172.16.0.0/28", description="The control plane's private /28 (private cluster).")

    @field_validator("nodes_cidr")
    @classmethod
    def _nodes(cls, value: str) -> str:
        return private_cidr(value, 16, 24)

    @field_validator("pods_cidr")
    @classmethod
    def _pods(cls, value: str) -> str:
        return private_cidr(value, 9, 21)

    @field_validator("services_cidr")
    @classmethod
    def _services(cls, value: str) -> str:
        return private_cidr(value, 16, 27)

    @field_validator("master_cidr")
    @classmethod
    def _master(cls, value: str) -> str:
        if not value.endswith("/28"):
            raise ValueError("GKE's private control plane range must be a /28")
        return private_cidr(value, 28, 28)


class GkeClusterSpec(Spec):
    release_channel: Literal["RAPID", "REGULAR", "STABLE"] = Field(
        "REGULAR", description="GKE release channel: Google upgrades the control plane and nodes within it."
    )
    endpoint: EndpointSpec = Field(
        default_factory=EndpointSpec,
        description="Reachability of the Kubernetes API, as on AWS: 'private' (private "
        "endpoint only), 'restricted' (public endpoint limited to publicAccessCidrs through "
        "master authorized networks); never the whole internet.",
    )
    network: GkeNetworkSpec = Field(default_factory=GkeNetworkSpec, description="VPC ranges.")
    network_policy: Literal["dataplane-v2", "calico"] = Field(
        "dataplane-v2",
        description="What enforces the cluster's NetworkPolicies (the model servers admit the gateway only): "
        "'dataplane-v2' (GKE Dataplane V2, chosen when the cluster is created: set on a cluster that runs without "
        "it, it replaces the cluster) or 'calico' (GKE's managed Calico, switched on in place, recreating every "
        "node once: for a cluster created without Dataplane V2).",
    )


class GkePoolSpec(Spec):
    machine_types: list[str] = Field(
        min_length=1,
        max_length=1,
        description="The machine type of the pool (one per GKE node pool).",
    )
    min_nodes: int = Field(
        1, ge=0, le=100, description="Nodes the autoscaler keeps without load, in total over the pool's zones."
    )
    max_nodes: int = Field(4, ge=1, le=100, description="Most nodes of the pool, in total over its zones.")
    disk_gib: int = Field(200, ge=50, le=4096, description="Boot disk per node, GiB (images and model cache).")
    spot: bool = Field(False, description="Buy nodes as Spot VMs (cheaper, can be preempted).")


class L4PoolSpec(GkePoolSpec):
    machine_types: list[str] = Field(
        default_factory=lambda: ["g2-standard-8"],
        min_length=1,
        max_length=1,
        description="The G2 machine type of the pool (one per GKE node pool; add pools for more sizes).",
    )


class A100PoolSpec(GkePoolSpec):
    machine_types: list[str] = Field(
        default_factory=lambda: ["a2-highgpu-1g"],
        min_length=1,
        max_length=1,
        description="The A2 machine type of the pool: a2-highgpu-* (A100 40GB) or a2-ultragpu-* (A100 80GB).",
    )
    min_nodes: int = Field(
        0, ge=0, le=100, description="Nodes the autoscaler keeps without load, in total (A100s idle are costly)."
    )


class GcpNodePoolsSpec(Spec):
    l4: L4PoolSpec = Field(default_factory=L4PoolSpec, description="NVIDIA L4 pool (G2), tainted nvidia.com/gpu.")
    a100: A100PoolSpec | None = Field(
        None, description="NVIDIA A100 pool (A2), tainted nvidia.com/gpu; declared only when set (e.g. a100: {})."
    )

    def declared(self) -> dict[str, GkePoolSpec]:
        pools: dict[str, GkePoolSpec | None] = {"l4": self.l4, "a100": self.a100}
        return {family: pool for family, pool in pools.items() if pool is not None}


class ModelStoreSpec(Spec):
    bucket: GcsBucketName = Field(
        pattern=GCS_BUCKET_PATTERN,
        description="The GCS bucket mirroring the registry's models/ prefix (the bridge); model servers read "
        "gs://<bucket>/models/<name>/<version>/<variant>/ read-only.",
    )
    grant_read: bool = Field(
        True,
        description="Grant each model server's service account read on the bucket from this stack. Set false when "
        "the bucket's own stack grants it (the registry's mirror lists the readers in mlinfra:registry.mirror."
        "readers): one IAM binding must have one owner, or destroying either stack revokes the other's.",
    )


class GcpModelSpec(ModelSpec):
    accelerator: Literal["l4", "a100"] = Field(
        description="Node pool that serves it: l4 (NVIDIA L4 on G2) or a100 (NVIDIA A100 on A2; declare "
        "nodePools.a100)."
    )


class GcpImageMirrorSpec(Spec):
    enabled: bool = Field(
        True,
        description="Pull Docker Hub images through an Artifact Registry remote repository (docker-hub) in the "
        "stack's region, which keeps what it pulled, instead of anonymously from Docker Hub through Cloud NAT.",
    )


# A Secret Manager secret by its resource name, its project by id (so it can be compared with the stack's).
SECRET_NAME = r"projects/([a-z][a-z0-9-]{4,28}[a-z0-9])/secrets/([A-Za-z0-9_-]{1,255})"


def secret_project(name: str) -> str:
    return first_group(SECRET_NAME, name)


def _secret_name(value: str | None) -> str | None:
    if value is not None and not re.fullmatch(SECRET_NAME, value):
        raise ValueError(
            f"{value!r} is not a Secret Manager secret name: projects/<project id>/secrets/<secret id> (the project "
            "by its id, not its number)"
        )
    return value


class GcpGatewaySpec(GatewaySpec):
    tls_secret: str = Field(
        description="Secret Manager secret (projects/<project>/secrets/<id>, the stack's project) holding the "
        'hostname\'s certificate as a JSON object {"tls.crt": "<PEM chain>", "tls.key": "<PEM key>"}: synced into '
        "the cluster, where the gateway's proxies end TLS with it (a passthrough load balancer sits in front); "
        "a new version reaches the proxies within minutes, so renewals need no up.",
    )
    api_keys_secret: str | None = Field(
        None,
        description="Secret Manager secret (projects/<project>/secrets/<id>, the stack's project) holding the API "
        'keys as a JSON object, one entry per client ({"team-a": "<key>", ...}); synced into the cluster, never in '
        "config or state. Required with auth api-key.",
    )

    @field_validator("tls_secret", "api_keys_secret")
    @classmethod
    def _secrets(cls, value: str | None) -> str | None:
        return _secret_name(value)


class GcpServingSpec(Spec):
    cluster: GkeClusterSpec = Field(default_factory=GkeClusterSpec, description="The GKE cluster.")
    node_pools: GcpNodePoolsSpec = Field(default_factory=GcpNodePoolsSpec, description="Accelerator node pools.")
    image_mirror: GcpImageMirrorSpec = Field(
        default_factory=GcpImageMirrorSpec, description="Where the nodes pull Docker Hub images from."
    )
    namespace: str = Field(
        "models",
        pattern=r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$",
        description="Kubernetes namespace of the model servers.",
    )
    model_store: ModelStoreSpec = Field(description="Where the servers read models from (the GCS bridge bucket).")
    models: list[GcpModelSpec] = Field(min_length=1, max_length=50, description="Models to serve, one server each.")
    gateway: GcpGatewaySpec | None = Field(
        None,
        description="The stack's front door: one TLS, authenticated, OpenAI-compatible endpoint routing by model. "
        "Unset: no endpoint outside the cluster (the model servers still accept only the gateway's and the "
        "metrics scraper's traffic).",
    )

    @field_validator("models")
    @classmethod
    def _unique_names(cls, models: list[GcpModelSpec]) -> list[GcpModelSpec]:
        names = [m.name for m in models]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise ValueError(f"model name {dup!r} appears twice; each model gets one server")
        return models


class GcpServingStackConfig(Spec):
    kind: Literal["serving"] = Field(description="Stack kind.")
    cloud: Literal["gcp"] = Field(description="Cloud of the stack.")
    serving: GcpServingSpec = Field(description="The serving fleet on GKE.")
