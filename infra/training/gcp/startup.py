"""The GCP training node's startup script: the shared bootstrap of `infra/training/bootstrap.py` with GCP's parts.

Shared (one template): the expiry backstop, the Lustre mount and rendezvous (rank = index of the node's IP
among the sorted IPs), torchrun, the grace period, the exit trap and the marker JSON. GCP's parts:
- Managed Lustre is mounted like FSx (`mount -t lustre <ip>@tcp:/<filesystem>`; the instance's mountPoint);
- the node checks it has nic0 plus one NIC per GPU NIC of the machine type;
- the private IP comes from the metadata server (`Metadata-Flavor: Google`, network-interfaces/0/ip);
- Managed Lustre is not linked to a bucket continuously, so "export" is rank 0 copying /fsx/checkpoints to
  gs://<bucket>/checkpoints/<run-id>/ with `gcloud storage cp` (bounded by the same export timeout), and
  the marker goes to gs://<bucket>/runs/<run-id>/_SUCCESS|_FAILED with `gcloud storage cp -`;
- powering off stops the VM: GPU and vCPU billing stop, the boot disk bills until the teardown deletes the VM
  (stopping clears a VM's time limit, so Compute Engine no longer deletes a stopped node at expires-at).
NCCL over GPUDirect-TCPX/TCPXO needs the image's NCCL plugin (and, for TCPX, its receive-datapath manager);
this script does not install it: `image` names an image that has it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from infra.registry.layout import runs_prefix
from infra.training.bootstrap import Platform, RunBootstrap, common_values, positive_int, render_script
from infra.training.gcp.plan import checkpoints_uri

GCP_PLATFORM = Platform.from_shell(
    "infra.training.gcp",
    "platform.sh",
    metadata_name="the metadata server",
    power_off_means="that stops the VM (its GPUs and vCPUs stop billing); the teardown deletes it",
    power_off_on_exit_note="Shutdown stops the VM, so GPU and vCPU billing stop within minutes of the job's end.",
)


@dataclass(frozen=True, kw_only=True)
class GcpNodeBootstrap(RunBootstrap):
    """What a GCP training node needs to join its run (the shared fields keep the AWS names and meaning)."""

    MARKER_BUCKET_FIELD = "bucket"

    gpus_per_node: int
    gpu_nics: int
    lustre_mount_point: str  # Managed Lustre's mountPoint output: "<ip>@tcp:/<filesystem>"
    bucket: str

    @property
    def nproc_per_node(self) -> int:
        return self.gpus_per_node

    def problems(self) -> list[str]:
        problems = super().problems()
        if not positive_int(self.gpus_per_node):
            problems.append(f"gpus_per_node must be a whole number >= 1 (got {self.gpus_per_node!r})")
        if not isinstance(self.gpu_nics, int) or isinstance(self.gpu_nics, bool) or self.gpu_nics < 0:
            problems.append(f"gpu_nics must be a whole number >= 0 (got {self.gpu_nics!r})")
        if "@tcp:/" not in (self.lustre_mount_point or ""):
            problems.append(f"lustre_mount_point must read <ip>@tcp:/<filesystem> (got {self.lustre_mount_point!r})")
        return problems


def render_startup_script(spec: GcpNodeBootstrap) -> str:
    """The startup script of every node of the GCP run described by `spec`."""
    q = shlex.quote
    values = {
        **common_values(spec, spec.lustre_mount_point, f"gs://{spec.bucket}/{runs_prefix(spec.run_id).rstrip('/')}"),
        "GPU_NICS": str(spec.gpu_nics),
        "CHECKPOINTS_URI": q(checkpoints_uri(spec.bucket, spec.run_id).rstrip("/")),
        "FABRIC_ENV": "# NCCL over GPUDirect-TCPX/TCPXO: the image's NCCL plugin and its settings (not set here)\n",
    }
    return render_script(GCP_PLATFORM, values)
