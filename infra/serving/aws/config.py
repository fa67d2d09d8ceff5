"""Config of the `serving` stack kind: a long-lived EKS fleet on inf2 and g5 serving registry models."""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Literal

from pydantic import Field, field_validator

from infra.catalog.eks_versions import version_problem
from infra.core.naming import first_group
from infra.core.network import is_rfc1918
from infra.core.spec import Spec
from infra.serving.aws.mirror import CREDENTIAL_SECRET_PREFIX
from infra.serving.charts import KUBERNETES_RELEASES
from infra.serving.gateway_spec import GatewaySpec
from infra.serving.spec import IMAGE_REFERENCE, EndpointSpec, ModelSpec, pinned_image

# CloudWatch Logs accepts only these retention periods (PutRetentionPolicy).
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
Accelerator = Literal["inf2", "g5", "g4dn", "g6", "g6e"]


class ClusterSpec(Spec):
    kubernetes_version: str = Field(
        "1.33",
        description=f"EKS Kubernetes minor version: {', '.join(KUBERNETES_RELEASES)} (the versions whose "
        "cluster autoscaler chart and Neuron kube-scheduler are pinned and checked).",
    )
    endpoint: EndpointSpec = Field(default_factory=EndpointSpec, description="Reachability of the Kubernetes API.")
    log_retention_days: int = Field(
        90, description=f"Days the control plane logs are kept; one of {', '.join(map(str, LOG_RETENTION_DAYS))}."
    )
    admin_role_arns: list[str] = Field(
        default_factory=list,
        description="IAM roles given cluster-admin through EKS access entries (the platform team's roles).",
    )
    vpc_cidr: str = Field(
        "10.80.0.0/16", description="CIDR of the cluster's VPC (split into public and private subnets)."
    )
    availability_zones: int = Field(
        2,
        ge=2,
        le=3,
        description="AZs the cluster and its private node subnets span, 2 or 3: chosen by zone ID among those "
        "EKS supports, where the node pools' instance types are offered (each pool uses the ones offering all "
        "its sizes).",
    )
    availability_zone_ids: list[str] | None = Field(
        None,
        min_length=2,
        max_length=3,
        description="Zone IDs (use1-az2, ...) the cluster uses, in subnet order, instead of choosing them: keeps a "
        "deployed cluster in the zones it was created in, which EKS cannot change. availabilityZones is then their "
        "count.",
    )

    @field_validator("kubernetes_version")
    @classmethod
    def _pinned_release(cls, value: str) -> str:
        problem = version_problem(value)
        if problem:
            raise ValueError(f"{problem}; mlinfra pins charts for {', '.join(KUBERNETES_RELEASES)}")
        if value not in KUBERNETES_RELEASES:
            raise ValueError(
                f"no pinned cluster autoscaler chart and kube-scheduler; one of {', '.join(KUBERNETES_RELEASES)}"
            )
        return value

    @field_validator("availability_zone_ids")
    @classmethod
    def _zone_ids(cls, values: list[str] | None) -> list[str] | None:
        for value in values or []:
            if not re.fullmatch(r"[a-z]{2,6}[0-9]-az[0-9]{1,2}", value):
                raise ValueError(
                    f"{value!r} is not an availability zone ID (like use1-az2; names like us-east-1a differ by account)"
                )
        if values is not None and len(set(values)) != len(values):
            raise ValueError("lists a zone twice; give two or three different zone IDs")
        return values

    @field_validator("log_retention_days")
    @classmethod
    def _allowed_retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            raise ValueError(
                f"CloudWatch Logs does not offer {value} days; one of {', '.join(map(str, LOG_RETENTION_DAYS))}"
            )
        return value

    @field_validator("admin_role_arns")
    @classmethod
    def _role_arns(cls, values: list[str]) -> list[str]:
        for value in values:
            if not re.fullmatch(r"arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]{1,512}", value):
                raise ValueError(f"{value!r} is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)")
        return values

    @field_validator("vpc_cidr")
    @classmethod
    def _vpc_cidr(cls, value: str) -> str:
        try:
            network = ipaddress.IPv4Network(value, strict=True)
        except ValueError as error:
            raise ValueError(f"not an IPv4 CIDR: {error}") from None
        if not 16 <= network.prefixlen <= 20:
            raise ValueError("use a /16 to /20 (room for public and private subnets in every AZ)")
        if not is_rfc1918(network):
            raise ValueError("use a private (RFC 1918) range: within 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16")
        return value


class NodePoolSpec(Spec):
    instance_types: list[str] = Field(
        min_length=2,
        max_length=8,
        description="Two or more sizes of the pool's family, so a capacity shortage of one size does not stop "
        "scaling; each size is its own node group (the autoscaler models a group by one shape).",
    )
    min_size: int = Field(
        1,
        ge=0,
        le=100,
        description="Nodes kept running without load, of the pool's smallest type that holds a replica of every "
        "model it serves.",
    )
    max_size: int = Field(
        4, ge=1, le=100, description="Most nodes of each instance type (each type's node group stops there)."
    )
    disk_gib: int = Field(
        200, ge=50, le=4096, description="Encrypted gp3 root volume per node, GiB (images and model cache)."
    )


def _sizes(first: str, second: str, what: str) -> Any:
    """The instanceTypes field of a pool: two sizes by default, two to eight."""
    return Field(
        default_factory=lambda: [first, second],
        min_length=2,
        max_length=8,
        description=f"Two or more {what} sizes, so a capacity shortage of one size does not stop scaling.",
    )


class Inf2PoolSpec(NodePoolSpec):
    instance_types: list[str] = _sizes("inf2.xlarge", "inf2.8xlarge", "inf2")
    capacity_type: Literal["on-demand"] = Field(
        "on-demand", description="inf2 runs on demand (Spot capacity for Inferentia is scarce and reclaimed often)."
    )


class GpuPoolSpec(NodePoolSpec):
    capacity_type: Literal["on-demand", "spot"] = Field(
        "on-demand",
        description="Buy the pool's nodes on demand, or as Spot (cheaper, can be reclaimed with 2 minutes' notice).",
    )
    on_demand_base: int = Field(
        1,
        ge=0,
        le=100,
        description="With capacityType spot: nodes bought on demand and kept running, of the type that keeps the "
        "pool's minimum (the smallest that holds its models' replicas), so a Spot reclaim never takes every replica "
        "(replicas spread over capacity types). 0: Spot only.",
    )
    on_demand_fallback: bool = Field(
        True,
        description="With capacityType spot: an on-demand group of each of the pool's types, empty until the cluster "
        "autoscaler cannot get Spot capacity (its priority expander tries the Spot groups first, and a group whose "
        "launch failed backs off), so a Spot shortage never leaves a model below its replicas. Its nodes are not "
        "moved back to Spot: the autoscaler removes them when they are unneeded.",
    )


class G5PoolSpec(GpuPoolSpec):
    instance_types: list[str] = _sizes("g5.xlarge", "g5.2xlarge", "g5 (NVIDIA A10G, 24 GB)")


class G4dnPoolSpec(GpuPoolSpec):
    instance_types: list[str] = _sizes("g4dn.xlarge", "g4dn.2xlarge", "g4dn (NVIDIA T4, 16 GB)")


class G6PoolSpec(GpuPoolSpec):
    instance_types: list[str] = _sizes("g6.xlarge", "g6.2xlarge", "g6 (NVIDIA L4, 24 GB)")


class G6ePoolSpec(GpuPoolSpec):
    instance_types: list[str] = _sizes("g6e.xlarge", "g6e.2xlarge", "g6e (NVIDIA L40S, 48 GB)")


class NodePoolsSpec(Spec):
    inf2: Inf2PoolSpec = Field(
        default_factory=Inf2PoolSpec, description="Inferentia2 pool, tainted aws.amazon.com/neuron."
    )
    g5: G5PoolSpec = Field(default_factory=G5PoolSpec, description="A10G pool, tainted nvidia.com/gpu.")
    # Pool keys are family names, not camelCase words (the alias generator would write g4Dn, g6E).
    g4dn: G4dnPoolSpec | None = Field(
        None, alias="g4dn", description="T4 pool, tainted nvidia.com/gpu; declared only when set (e.g. g4dn: {})."
    )
    g6: G6PoolSpec | None = Field(None, description="L4 pool, tainted nvidia.com/gpu; declared only when set.")
    g6e: G6ePoolSpec | None = Field(
        None, alias="g6e", description="L40S pool, tainted nvidia.com/gpu; declared only when set."
    )

    def declared(self) -> dict[str, NodePoolSpec]:
        """The pools the stack declares, by family, in a stable order."""
        pools = {"inf2": self.inf2, "g5": self.g5, "g4dn": self.g4dn, "g6": self.g6, "g6e": self.g6e}
        return {family: pool for family, pool in pools.items() if pool is not None}


class ImageMirrorSpec(Spec):
    enabled: bool = Field(
        True,
        description="Pull images through the account's ECR pull-through cache (rules for ECR Public and, with a "
        "credential, Docker Hub) instead of from the public registries through the NAT gateways.",
    )
    docker_hub_credential_arn: str | None = Field(
        None,
        description="Secrets Manager secret (name starting with ecr-pullthroughcache/) holding a Docker Hub "
        "username and access token: needed to mirror Docker Hub images (ECR requires it for that upstream).",
    )

    @field_validator("docker_hub_credential_arn")
    @classmethod
    def _secret_arn(cls, value: str | None) -> str | None:
        prefix = re.escape(CREDENTIAL_SECRET_PREFIX)
        if value is not None and not re.fullmatch(
            rf"arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{{12}}:secret:{prefix}[\w/+=.@-]+", value
        ):
            raise ValueError(
                f"must be a Secrets Manager secret ARN whose name starts with {CREDENTIAL_SECRET_PREFIX} "
                f"(arn:aws:secretsmanager:<region>:<account>:secret:{CREDENTIAL_SECRET_PREFIX}<name>)"
            )
        return value


ACM_CERTIFICATE_ARN = r"arn:aws[a-z-]*:acm:([a-z0-9-]+):[0-9]{12}:certificate/[0-9a-f-]{36}"
SECRET_ARN = r"arn:aws[a-z-]*:secretsmanager:([a-z0-9-]+):[0-9]{12}:secret:[\w/+=.@-]+"


class AwsGatewaySpec(GatewaySpec):
    certificate_arn: str = Field(
        description="ACM certificate for the hostname, in the stack's region (the Network Load Balancer "
        "terminates TLS with it; its private key never enters the cluster)."
    )
    api_keys_secret_arn: str | None = Field(
        None,
        description="Secrets Manager secret holding the API keys as a JSON object, one entry per client "
        '({"team-a": "<key>", ...}); synced into the cluster, never in config or state. Required with auth '
        "api-key; the client's name is what its rate limit and logs are keyed on.",
    )

    @field_validator("certificate_arn")
    @classmethod
    def _certificate(cls, value: str) -> str:
        if not re.fullmatch(ACM_CERTIFICATE_ARN, value):
            raise ValueError(
                f"{value!r} is not an ACM certificate ARN (arn:aws:acm:<region>:<account>:certificate/<id>)"
            )
        return value

    @field_validator("api_keys_secret_arn")
    @classmethod
    def _secret(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(SECRET_ARN, value):
            raise ValueError(
                f"{value!r} is not a Secrets Manager secret ARN (arn:aws:secretsmanager:<region>:<account>:secret:"
                "<name>)"
            )
        return value

    @property
    def certificate_region(self) -> str:
        return first_group(ACM_CERTIFICATE_ARN, self.certificate_arn)


class AwsModelSpec(ModelSpec):
    accelerator: Accelerator = Field(
        description="Node pool that serves it: inf2 (Inferentia2), g5 (A10G), g4dn (T4), g6 (L4) or g6e (L40S); "
        "the pool must be declared in nodePools."
    )


class ServingSpec(Spec):
    cluster: ClusterSpec = Field(default_factory=ClusterSpec, description="The EKS cluster.")
    node_pools: NodePoolsSpec = Field(default_factory=NodePoolsSpec, description="Accelerator node pools.")
    namespace: str = Field(
        "models",
        pattern=r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$",
        description="Kubernetes namespace of the model servers.",
    )
    models: list[AwsModelSpec] = Field(
        min_length=1, max_length=50, description="Models to serve, one model server each."
    )
    image_mirror: ImageMirrorSpec = Field(
        default_factory=ImageMirrorSpec, description="Where the cluster's images are pulled from."
    )
    gateway: AwsGatewaySpec | None = Field(
        None,
        description="The stack's front door: one TLS, authenticated, OpenAI-compatible endpoint routing by model. "
        "Unset: no endpoint outside the cluster (the model servers still accept only the gateway's and the "
        "metrics scraper's traffic).",
    )
    converter_image: str | None = Field(
        None,
        description="The converter image promote builds the quantised CUDA variants in (cuda-fp8, cuda-int8, "
        "cuda-int4: llm-compressor), built from images/converter/Dockerfile and pushed where the cluster pulls "
        "from; pinned by tag or digest. Needed only to promote those variants.",
        json_schema_extra={"pattern": IMAGE_REFERENCE},
    )

    @field_validator("converter_image")
    @classmethod
    def _pinned_converter(cls, image: str | None) -> str | None:
        return None if image is None else pinned_image(image)

    @field_validator("models")
    @classmethod
    def _unique_names(cls, models: list[AwsModelSpec]) -> list[AwsModelSpec]:
        seen = set()
        for model in models:
            if model.name in seen:
                raise ValueError(f"model name {model.name!r} appears twice; each model gets one server")
            seen.add(model.name)
        return models


class ServingStackConfig(Spec):
    kind: Literal["serving"] = Field(description="Stack kind.")
    registry_stack: str = Field(
        description="Stack holding the registry, as for a StackReference: 'registry' or 'org/mlinfra/registry'."
    )
    serving: ServingSpec = Field(description="The serving fleet.")
