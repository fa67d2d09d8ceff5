"""Config of the `training` stack kind on GCP (`mlinfra:cloud: gcp`): one run on whole A3 nodes in a compact
placement policy, with one extra VPC per GPU NIC, Managed Lustre in the same zone, and a hard lifetime.

The run id, the job and the lifecycle are the AWS models themselves (`infra.training.aws.config`), so both clouds
read `runId`, `job` and `lifecycle.ttlHours`/`expiresAt` the same way."""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, field_validator

from infra.core.spec import Spec
from infra.training.aws.config import RUN_ID_PATTERN, JobSpec, LifecycleSpec
from infra.training.aws.network import private_cidr

GCS_BUCKET_PATTERN = r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$"
ZONE_PATTERN = r"^[a-z]+-[a-z]+[0-9]+-[a-z]$"


class ManagedLustreSpec(Spec):
    """Sizing intents, as on AWS (`lustre.*`), for Google Cloud Managed Lustre."""
    dataset_gib: float = Field(1200, ge=0, description="Size of the training data copied in from the data bucket's datasets/, GiB.")
    checkpoint_gib: float = Field(500, ge=0, description="Size of one full checkpoint, GiB.")
    checkpoint_write_seconds: float = Field(600, gt=0, description="Target time to write one checkpoint, seconds.")
    read_throughput_gbps: float = Field(10, ge=0, description="Target aggregate read throughput for data loading, GB/s.")
    per_unit_storage_throughput: Optional[Literal[125, 250, 500, 1000]] = Field(
        None, description="Pin the performance tier, MB/s per TiB; default: the cheapest tier and size that meet the targets.")
    capacity_gib: Optional[int] = Field(
        None, description="Override the sized capacity, GiB (a multiple of the tier's step, at least its minimum).")


class GcpTrainingNetworkSpec(Spec):
    cidr: str = Field("10.64.0.0/20", description="Range of the primary subnet (the host NIC, nic0) and Managed Lustre's clients.")
    gpu_cidr: str = Field("10.128.0.0/16", description="Range split into one /20 subnet per GPU NIC VPC (as the A3 blueprints do).")
    lustre_cidr: str = Field("10.200.0.0/20", description="Range reserved for Managed Lustre through private services access.")

    @field_validator("cidr", "lustre_cidr")
    @classmethod
    def _primary(cls, value: str) -> str:
        return private_cidr(value, 16, 24)

    @field_validator("gpu_cidr")
    @classmethod
    def _gpu(cls, value: str) -> str:
        return private_cidr(value, 9, 16)


class GcpTrainingSpec(Spec):
    run_id: str = Field(pattern=RUN_ID_PATTERN, description="Run id: lowercase letters, digits and '-', up to 40 characters.")
    machine_type: str = Field(description="GCP training machine type from the catalog: a3-highgpu-8g or a3-megagpu-8g.")
    node_count: int = Field(ge=1, le=256, description="Whole nodes in the compact placement policy, 1 to 256.")
    zone: Optional[str] = Field(None, pattern=ZONE_PATTERN,
                                description="Zone of every node and the file system; default: the first zone of gcp:region "
                                            "the catalog lists as offering the machine type.")
    data_bucket: str = Field(pattern=GCS_BUCKET_PATTERN,
                             description="GCS bucket the run reads datasets/ from and writes checkpoints/<run-id>/ and "
                                         "runs/<run-id>/ (markers) to. The AWS registry stays the source of truth.")
    image: str = Field(description="Boot image of the nodes (an image or image family path) with the NVIDIA driver and the "
                                   "GPUDirect-TCPX/TCPXO NCCL plugin the machine type needs.")
    boot_disk_gib: int = Field(200, ge=100, le=16384, description="Boot disk per node (pd-balanced, Google-encrypted), GiB.")
    lustre: ManagedLustreSpec = Field(default_factory=ManagedLustreSpec, description="Sizing intents for Managed Lustre.")
    network: GcpTrainingNetworkSpec = Field(default_factory=GcpTrainingNetworkSpec, description="Network ranges of the run.")
    job: JobSpec = Field(default_factory=JobSpec, description="What the nodes run (as on AWS).")
    lifecycle: LifecycleSpec = Field(default_factory=LifecycleSpec, description="How long the run may live (as on AWS).")


class GcpTrainingStackConfig(Spec):
    kind: Literal["training"] = Field(description="Stack kind.")
    cloud: Literal["gcp"] = Field(description="Cloud of the stack.")
    training: GcpTrainingSpec = Field(description="The run.")
