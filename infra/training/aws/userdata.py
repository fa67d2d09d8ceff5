"""The AWS training node's bootstrap (bash user data): the shared template of `infra/training/bootstrap.py`
with AWS's parts.

- before anything else, the node checks the image has what the script relies on (the AWS CLI, the Lustre
  client and lfs, libfabric's EFA provider, the aws-ofi-nccl plugin on GPU nodes: infra/catalog/data/
  aws_node_images.json); a fact that does not hold ends the run with a _FAILED marker naming it;
- the node checks it exposes the EFA devices its launch template attached;
- the private IP comes from IMDSv2 (token, then meta-data/local-ipv4);
- FSx for Lustre exports /fsx/checkpoints to the registry through its data repository association, so rank 0
  waits (bounded) until Lustre's HSM state says every checkpoint file is archived, and writes the marker with
  `aws s3 cp --sse aws:kms` and the registry's key;
- powering off terminates the node (the launch template's shutdown behaviour).

Collectives over EFA, never silently over TCP: on GPU nodes NCCL_NET=OFI makes NCCL use the aws-ofi-nccl plugin
or fail (NCCL matches NCCL_NET against each network's name and falls back to nothing, NCCL v2.27.7
src/plugin/net.cc; aws-ofi-nccl v1.17.1 answers to "OFI"), NCCL_NET_PLUGIN names the plugin library the image
check found, and FI_PROVIDER=efa keeps libfabric on EFA; then the fabric gate measures it. aws-ofi-nccl >= 1.7
with libfabric >= 1.18 needs no other NCCL_* tuning (the plugin's doc/efa-env-var.md); FI_EFA_USE_HUGE_PAGE=0
avoids ENOMEM on fork. Neuron (from the Neuron multi-node recipes): FI_EFA_FORK_SAFE=1 and
NEURON_RT_ROOT_COMM_ID=<rank-0 ip>:<port>, a port distinct from torchrun's; rank 0 is torchrun's rank 0 because
the rendezvous is static.

EC2 takes at most 16 KB of user data, counted before base64 (EC2 user guide, "Work with instance user data"; the
API's base64 form is at most 21,847 characters, so 16,383 raw bytes): the script goes gzip-compressed, which
cloud-init recognises and decompresses ("User-data formats: gzip compressed content").
"""

from __future__ import annotations

import base64
import gzip
import shlex
from dataclasses import dataclass
from typing import Literal

from infra.catalog.aws.node_images import DlamiFacts, ImageFact
from infra.core.naming import is_region_name
from infra.registry.layout import runs_prefix
from infra.training.bootstrap import Platform, RunBootstrap, common_values, positive_int, render_script

NEURON_ROOT_COMM_PORT = 41000
USER_DATA_MAX_BYTES = 16383  # 16 KB raw, and 21,847 base64 characters: the stricter of EC2's two limits
NCCL_NET_PLUGIN_VAR = "MLINFRA_NCCL_NET_PLUGIN"  # set by the image check to the plugin library it found


@dataclass(frozen=True, kw_only=True)
class NodeBootstrap(RunBootstrap):
    """What an AWS training node needs to join its run. Build from the catalog and the stack's resources."""

    MARKER_BUCKET_FIELD = "registry_bucket"

    accelerator_kind: Literal["gpu", "neuron"]
    devices_per_node: int  # GPUs, or Neuron devices (chips)
    efa_devices: int  # EFA devices the launch template attaches (infra.training.aws.efa.efa_device_count)
    lustre_dns_name: str
    lustre_mount_name: str
    registry_bucket: str
    registry_region: str
    # What the script relies on in the image, checked on the node first (infra.training.aws.images).
    image: DlamiFacts | None = None
    # torchrun --nproc-per-node; defaults to devices_per_node. On Neuron, pass one per NeuronCore.
    processes_per_node: int | None = None
    efa_device_rdma: bool = True  # FI_EFA_USE_DEVICE_RDMA=1; every training type supports RDMA read
    # The registry's KMS key ARN. Pass it: with `--sse aws:kms` and no key id, S3 encrypts with the
    # AWS managed key aws/s3, not the registry's key (S3 PutObject docs, SSEKMSKeyId).
    registry_kms_key_id: str | None = None

    @property
    def nproc_per_node(self) -> int:
        return self.processes_per_node or self.devices_per_node

    def problems(self) -> list[str]:
        problems = super().problems()
        if not positive_int(self.devices_per_node):
            problems.append(f"devices_per_node must be a whole number >= 1 (got {self.devices_per_node!r})")
        if not isinstance(self.efa_devices, int) or isinstance(self.efa_devices, bool) or self.efa_devices < 0:
            problems.append(f"efa_devices must be a whole number >= 0 (got {self.efa_devices!r})")
        if self.processes_per_node is not None and not positive_int(self.processes_per_node):
            problems.append(f"processes_per_node must be a whole number >= 1 (got {self.processes_per_node!r})")
        if self.accelerator_kind not in ("gpu", "neuron"):
            problems.append(f"accelerator_kind must be 'gpu' or 'neuron' (got {self.accelerator_kind!r})")
        if not is_region_name(self.registry_region):
            problems.append(f"registry_region must be an AWS region name like us-east-1 (got {self.registry_region!r})")
        for name in ("lustre_dns_name", "lustre_mount_name"):
            if not getattr(self, name):
                problems.append(f"{name} must not be empty")
        gate, backends = self.fabric_gate, {"gpu": "nccl", "neuron": "xla"}
        if gate is not None and self.accelerator_kind in backends and gate.backend != backends[self.accelerator_kind]:
            problems.append(f"fabric_gate.backend {gate.backend!r} does not run on {self.accelerator_kind} nodes")
        return problems


def render_user_data(spec: NodeBootstrap) -> str:
    """The bootstrap script for every node of the run described by `spec`."""
    q = shlex.quote
    runs = runs_prefix(spec.run_id)  # "runs/<run-id>/", validated against the registry layout
    kms = f" --sse-kms-key-id {q(spec.registry_kms_key_id)}" if spec.registry_kms_key_id else ""
    values = {
        **common_values(
            spec,
            f"{spec.lustre_dns_name}@tcp:/{spec.lustre_mount_name}",
            f"s3://{spec.registry_bucket}/{runs.rstrip('/')}",
        ),
        "EFA_DEVICES": str(spec.efa_devices),
        "REGION": q(spec.registry_region),
        "KMS_ARGS": kms,
        "NODE_CHECKS": _node_checks(spec),
        "FABRIC_ENV": _fabric_env(spec),
    }
    return render_script(AWS_PLATFORM, values)


def user_data_bytes(script: str) -> bytes:
    """The launch template's user data before base64: the script gzip-compressed (deterministic: no name, no
    time), which cloud-init decompresses. ValueError when it does not fit EC2's limit."""
    data = gzip.compress(script.encode(), compresslevel=9, mtime=0)
    if len(data) > USER_DATA_MAX_BYTES:
        raise ValueError(
            f"the node bootstrap is {len(data)} bytes of user data (gzip), over EC2's {USER_DATA_MAX_BYTES}-byte "
            "limit; shorten job.command and job.env"
        )
    return data


def user_data_base64(script: str) -> str:
    """What the launch template's userData takes: base64 of `user_data_bytes`."""
    return base64.b64encode(user_data_bytes(script)).decode()


def _node_checks(spec: NodeBootstrap) -> str:
    """Shell lines that prove the image's facts on the node (the template defines the require_* helpers)."""
    if spec.image is None:
        return "# (no image facts given: only torchrun is checked)\n"
    q = shlex.quote
    lines = [f"# {spec.image.description}: infra/catalog/data/aws_node_images.json"]
    for fact in spec.image.facts:
        if fact.check == "library" and spec.accelerator_kind != "gpu":
            continue  # the NCCL plugin: GPU nodes only (Neuron collectives bring their own)
        if fact.check == "command-ok" and spec.efa_devices == 0:
            continue  # libfabric's EFA provider: only where EFA devices are attached
        lines.append(_check_line(fact, q))
    return "\n".join(lines) + "\n"


def _check_line(fact: ImageFact, q) -> str:
    if fact.check == "command":
        return f"require_command {q(fact.what)} {q(fact.values[0])}"
    if fact.check == "command-ok":
        return f"require_ok {q(fact.what)} {' '.join(q(word) for word in shlex.split(fact.values[0]))}"
    return f"find_library {NCCL_NET_PLUGIN_VAR} {q(fact.what)} {' '.join(q(path) for path in fact.values)}"


def _fabric_env(spec: NodeBootstrap) -> str:
    lines = []
    if spec.efa_devices:
        lines += [
            "# libfabric over EFA (aws-ofi-nccl / Neuron collectives pick it up)",
            "export FI_PROVIDER=efa",
            *(["export FI_EFA_USE_DEVICE_RDMA=1"] if spec.efa_device_rdma else []),
            "export FI_EFA_USE_HUGE_PAGE=0",
        ]
    else:
        lines.append("# no EFA devices: collectives use TCP sockets")
    if spec.accelerator_kind == "gpu":
        if spec.efa_devices and spec.image is not None:
            lines += [
                "# NCCL over EFA only: the aws-ofi-nccl plugin the image check found, and NCCL_NET=OFI so NCCL fails",
                "# instead of falling back to TCP sockets; aws-ofi-nccl >= 1.7 with libfabric >= 1.18 needs no other",
                "# NCCL_* tuning",
                f'export NCCL_NET_PLUGIN="${{{NCCL_NET_PLUGIN_VAR}}}"',
                "export NCCL_NET=OFI",
            ]
        else:
            lines.append("# NCCL: aws-ofi-nccl >= 1.7 with libfabric >= 1.18 needs no NCCL_* tuning")
    else:
        lines += [
            "# Neuron runtime: collectives bootstrap through rank 0 (torchrun's rank 0: static rendezvous);",
            "# compiled graphs shared on Lustre",
            *(["export FI_EFA_FORK_SAFE=1"] if spec.efa_devices else []),
            f'export NEURON_RT_ROOT_COMM_ID="${{MLINFRA_RENDEZVOUS_HOST}}:{NEURON_ROOT_COMM_PORT}"',
            'export NEURON_COMPILE_CACHE_URL="${MLINFRA_RUN_DIR}/neuron-cache"',
        ]
    return "\n".join(lines) + "\n"


# The AWS parts of the script (EC2 with EFA and FSx for Lustre linked to the S3 registry).
AWS_PLATFORM = Platform.from_shell(
    "infra.training.aws",
    "platform.sh",
    metadata_name="IMDS",
    power_off_means="the launch template turns that into termination",
    power_off_on_exit_note=(
        "Shutdown terminates the node (launch template), so billing stops within minutes of the job's end."
    ),
)
