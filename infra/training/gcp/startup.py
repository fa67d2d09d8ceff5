"""The GCP training node's startup script: the shared bootstrap of `infra/training/bootstrap.py` with GCP's parts.

Shared (one template): the image check, the expiry backstop, the Lustre mount and the generation's rendezvous
(rank = index of the node's IP among the sorted IPs), the fabric gate, torchrun with a static rendezvous, the
grace period, the exit trap and the marker JSON. GCP's parts:
- the image must have gcloud, the Lustre client and the NCCL plugin for the machine's GPU NICs (checked first);
- Managed Lustre is mounted like FSx (`mount -t lustre <ip>@tcp:/<filesystem>`; the instance's mountPoint);
- the node checks it has nic0 plus one NIC per GPU NIC of the machine type;
- the private IP comes from the metadata server (`Metadata-Flavor: Google`, network-interfaces/0/ip);
- NCCL runs on the GPU NICs through GPUDirect-TCPX (a3-highgpu-8g) or -TCPXO (a3-megagpu-8g), as Google's A3
  recipes set it (infra/catalog/data/fabric.json, gpu_nics.sh), with NCCL_NET naming the plugin so NCCL fails
  rather than fall back to its own sockets; the GPU NICs are found by their subnets;
- Managed Lustre is not linked to a bucket continuously, so "export" is rank 0 copying /fsx/checkpoints to
  gs://<bucket>/checkpoints/<run-id>/ with `gcloud storage cp` (bounded by the same export timeout), and
  the marker goes to gs://<bucket>/runs/<run-id>/_SUCCESS|_FAILED with `gcloud storage cp -`;
- powering off stops the VM: GPU and vCPU billing stop, the boot disk bills until the teardown deletes the VM
  (stopping clears a VM's time limit, so Compute Engine no longer deletes a stopped node at expires-at).
The plugin and its receive-datapath manager come with the image (`image`); this script does not install them.
A startup script is a metadata value: at most 256 KiB (Compute Engine API, Metadata.items[].value).
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from dataclasses import dataclass

from infra.catalog.fabric import GcpNetPlugin
from infra.core.naming import gcs_bucket_problem
from infra.registry.layout import runs_prefix
from infra.training.bootstrap import (
    Platform,
    RunBootstrap,
    common_values,
    positive_int,
    render_script,
    shell_sections,
)
from infra.training.gcp.plan import checkpoints_uri

STARTUP_SCRIPT_MAX_BYTES = 262144  # Compute Engine: a metadata value is at most 256 KiB
_MARKER = re.compile(r"@@([A-Z][A-Z0-9_]*)@@")

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

    @staticmethod
    def marker_bucket_problem(name: str) -> str | None:
        return gcs_bucket_problem(name)

    gpus_per_node: int
    gpu_nics: int
    lustre_mount_point: str  # Managed Lustre's mountPoint output: "<ip>@tcp:/<filesystem>"
    bucket: str
    machine_type: str = ""  # named in the script's comments
    gpu_subnets: tuple[str, ...] = ()  # the GPU NICs' subnets, in NIC order (plan.gpu_nics)
    net_plugin: GcpNetPlugin | None = None  # NCCL on the GPU NICs; None: NCCL's defaults (no GPU NICs)

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
        for cidr in self.gpu_subnets:
            try:
                ipaddress.IPv4Network(cidr)
            except ValueError:
                problems.append(f"gpu_subnets: {cidr!r} is not an IPv4 network")
        plugin = self.net_plugin
        if plugin is not None and len(self.gpu_subnets) != self.gpu_nics:
            problems.append(f"gpu_subnets: one subnet per GPU NIC ({self.gpu_nics}), got {len(self.gpu_subnets)}")
        if plugin is not None and plugin.cpu_bindings and len(plugin.cpu_bindings[0]) != self.gpu_nics:
            problems.append(f"net_plugin: CPU bindings for {len(plugin.cpu_bindings[0])} NICs, not {self.gpu_nics}")
        if self.fabric_gate is not None and self.fabric_gate.backend != "nccl":
            problems.append(f"fabric_gate.backend {self.fabric_gate.backend!r} does not run on GPU nodes")
        return problems


def render_startup_script(spec: GcpNodeBootstrap) -> str:
    """The startup script of every node of the GCP run described by `spec`; ValueError when it would not fit a
    metadata value."""
    q = shlex.quote
    values = {
        **common_values(spec, spec.lustre_mount_point, f"gs://{spec.bucket}/{runs_prefix(spec.run_id).rstrip('/')}"),
        "GPU_NICS": str(spec.gpu_nics),
        "CHECKPOINTS_URI": q(checkpoints_uri(spec.bucket, spec.run_id).rstrip("/")),
        "NODE_CHECKS": _node_checks(spec),
        "FABRIC_ENV": gpu_nic_env(spec),
    }
    script = render_script(GCP_PLATFORM, values)
    size = len(script.encode())
    if size > STARTUP_SCRIPT_MAX_BYTES:
        raise ValueError(
            f"the node startup script is {size} bytes, over Compute Engine's {STARTUP_SCRIPT_MAX_BYTES}-byte "
            "metadata value limit; shorten job.command and job.env"
        )
    return script


def _node_checks(spec: GcpNodeBootstrap) -> str:
    q = shlex.quote
    lines = [
        "# the image named by `image` (GCP): gcloud, the Lustre client and the GPU NICs' NCCL plugin",
        "require_command 'the Google Cloud CLI (writes the completion marker)' gcloud",
        "require_command 'the Lustre client (mounts Managed Lustre)' mount.lustre",
    ]
    plugin = spec.net_plugin
    if plugin is not None:
        lines.append(
            f"find_library MLINFRA_NCCL_NET_PLUGIN {q(f'the {plugin.networking} NCCL plugin')} "
            f"{q(f'{plugin.lib_dir}/{plugin.plugin_file}')}"
        )
        if plugin.env_profile:
            lines.append(
                f"find_library MLINFRA_NCCL_ENV_PROFILE {q(f'the {plugin.networking} NCCL settings script')} "
                f"{q(f'{plugin.lib_dir}/{plugin.env_profile}')}"
            )
    return "\n".join(lines) + "\n"


def gpu_nic_env(spec: GcpNodeBootstrap) -> str:
    """The FABRIC_ENV section: NCCL on the machine's GPU NICs (gpu_nics.sh, from the catalog's plugin data)."""
    plugin = spec.net_plugin
    if plugin is None:
        return "# no GPU NICs: NCCL's defaults\n"
    q = shlex.quote
    sections = shell_sections("infra.training.gcp", "gpu_nics.sh")
    kind = "tcpxo" if plugin.env_profile else "tcpx"
    tx, rx = plugin.cpu_bindings or ((), ())
    values = {
        "GPU_SUBNETS": " ".join(q(c) for c in spec.gpu_subnets),
        "MACHINE_TYPE": spec.machine_type or "A3",
        "NET_NAME": q(plugin.net_name),
        "LIB_DIR": q(plugin.lib_dir),
        "RXDM_DIR": q(plugin.rxdm_socket_dir or ""),
        "LLCM_DIR": q(plugin.llcm_device_dir or ""),
        "ENV_PROFILE": q(f"{plugin.lib_dir}/{plugin.env_profile}"),
        "FIXED_ENV": "".join(f"export {k}={q(v)}\n" for k, v in plugin.env.items()),
        "TX_CPUS": " ".join(_cpu_list(c) for c in tx),
        "RX_CPUS": " ".join(_cpu_list(c) for c in rx),
    }
    text = sections["nics"] + sections[kind]
    return _MARKER.sub(lambda m: values[m.group(1)], text)


def _cpu_list(cpus: str) -> str:
    """A CPU list ("8-21,112-125") as one double-quoted array element."""
    if not re.fullmatch(r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*", cpus):
        raise ValueError(f"CPU list {cpus!r} is not like 8-21,112-125")
    return '"' + cpus + '"'
