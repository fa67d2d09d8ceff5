"""Accelerator device plugins as pinned Helm releases: NVIDIA for g5, Neuron (with its scheduler extension) for inf2."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi

from components.aliases import aliased
from components.serving.helm_release import helm_release
from infra.serving import charts


@dataclass(frozen=True)
class DevicePluginsArgs:
    kubernetes_version: str  # the Neuron chart's kube-scheduler follows the cluster's minor
    after: Sequence[pulumi.Resource] = field(default_factory=list)  # node pools the plugins run on


class DevicePlugins(pulumi.ComponentResource):
    """Needs a kubernetes provider for the cluster (opts.providers)."""

    def __init__(self, name: str, args: DevicePluginsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(
            "mlinfra:serving:DevicePlugins", name, None, aliased(opts, "mlinfra:device_plugins:DevicePlugins")
        )
        self.nvidia = helm_release(
            f"{name}-nvidia", charts.NVIDIA_DEVICE_PLUGIN, charts.nvidia_values(), self, args.after
        )
        self.neuron = helm_release(
            f"{name}-neuron", charts.NEURON, charts.neuron_values(args.kubernetes_version), self, args.after
        )
        self.register_outputs({"nvidia": self.nvidia.status, "neuron": self.neuron.status})
