"""Config of the `training` stack kind on GCP (`mlinfra:cloud: gcp`): one run on whole A3 nodes in a compact
placement policy, with one extra VPC per GPU NIC, Managed Lustre in the same zone, and a hard lifetime.

The run id, node count, job and lifecycle are the shared `RunSpec` (`infra.training.spec`), so both clouds
read `runId`, `job` and `lifecycle.ttlHours`/`expiresAt` the same way."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from infra.core.naming import GCS_BUCKET_PATTERN, GcsBucketName
from infra.core.network import private_cidr
from infra.core.spec import Spec
from infra.training.spec import LustreIntentSpec, RunSpec

# The image forms bootDisk.initializeParams.image takes (image, family, project/..., global/images/...,
# projects/<p>/global/images/[family/]..., or the API URL): lowercase names, no spaces or control characters.
GCE_IMAGE_PATTERN = r"^(https://www\.googleapis\.com/compute/(v1|beta)/)?[a-z0-9][a-z0-9._:/-]*[a-z0-9]$"
ZONE_PATTERN = r"^[a-z]+-[a-z]+[0-9]+-[a-z]$"


class ManagedLustreSpec(LustreIntentSpec):
    """Sizing intents, as on AWS (`lustre.*`), for Google Cloud Managed Lustre, and the overrides it allows."""

    per_unit_storage_throughput: Literal[125, 250, 500, 1000] | None = Field(
        None,
        description="Pin the performance tier, MB/s per TiB; "
        "default: the cheapest tier and size that meet the targets.",
    )
    capacity_gib: int | None = Field(
        None, description="Override the sized capacity, GiB (a multiple of the tier's step, at least its minimum)."
    )


class GcpTrainingNetworkSpec(Spec):
    cidr: str = Field(
        "10.64.0.0/20", description="Range of the primary subnet (the host NIC, nic0) and Managed Lustre's clients."
    )
    gpu_cidr: str = Field(
        "10.128.0.0/16", description="Range split into one /20 subnet per GPU NIC VPC (as the A3 blueprints do)."
    )
    lustre_cidr: str = Field(
        "10.200.0.0/20", description="Range reserved for Managed Lustre through private services access."
    )

    @field_validator("cidr", "lustre_cidr")
    @classmethod
    def _primary(cls, value: str) -> str:
        return private_cidr(value, 16, 24)

    @field_validator("gpu_cidr")
    @classmethod
    def _gpu(cls, value: str) -> str:
        return private_cidr(value, 9, 16)


class GcpTrainingSpec(RunSpec):
    machine_type: str = Field(description="GCP training machine type from the catalog: a3-highgpu-8g or a3-megagpu-8g.")
    zone: str | None = Field(
        None,
        pattern=ZONE_PATTERN,
        description="Zone of every node and the file system; default: the first zone of gcp:region "
        "the catalog lists as offering the machine type.",
    )
    data_bucket: GcsBucketName = Field(
        pattern=GCS_BUCKET_PATTERN,
        description="GCS bucket the run reads datasets/ from and writes checkpoints/<run-id>/ and "
        "runs/<run-id>/ (markers) to. The AWS registry stays the source of truth.",
    )
    image: str = Field(
        max_length=512,
        description="Boot image of the nodes (an image or image family path, e.g. "
        "projects/<project>/global/images/family/<family>) with the NVIDIA driver and the GPUDirect-TCPX/TCPXO NCCL "
        "plugin the machine type needs; lowercase letters, digits and . _ : / - only.",
    )
    boot_disk_gib: int = Field(
        200, ge=100, le=16384, description="Boot disk per node (pd-balanced, Google-encrypted), GiB."
    )
    lustre: ManagedLustreSpec = Field(
        default_factory=ManagedLustreSpec, description="Sizing intents for Managed Lustre."
    )
    network: GcpTrainingNetworkSpec = Field(
        default_factory=GcpTrainingNetworkSpec, description="Network ranges of the run."
    )

    @field_validator("image")
    @classmethod
    def _image_path(cls, value: str) -> str:
        if not re.fullmatch(GCE_IMAGE_PATTERN, value):
            raise ValueError(
                "must be a Compute Engine image or image family path such as "
                "projects/<project>/global/images/family/<family>: lowercase letters, digits and . _ : / - only, "
                "no spaces or control characters"
            )
        return value


class GcpTrainingStackConfig(Spec):
    kind: Literal["training"] = Field(description="Stack kind.")
    cloud: Literal["gcp"] = Field(description="Cloud of the stack.")
    training: GcpTrainingSpec = Field(description="The run.")
