"""One GKE node pool from a pure plan: autoscaled within bounds, private nodes, shielded VMs, Workload
Identity's metadata server, and for accelerator pools the GPUs with GKE-installed drivers and a taint."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.aliases import aliased
from infra.serving.gcp import gke


@dataclass(frozen=True)
class GkeNodePoolArgs:
    plan: gke.GkePoolPlan
    cluster_id: pulumi.Input[str]
    region: str
    service_account: pulumi.Input[str]  # the nodes' account email
    labels: Mapping[str, str]


def _accelerators(plan: gke.GkePoolPlan) -> list[gcp.container.NodePoolNodeConfigGuestAcceleratorArgs] | None:
    if not plan.accelerator_type:
        return None
    return [
        gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
            type=plan.accelerator_type,
            count=plan.accelerator_count,
            # GKE installs the driver (and its device plugin advertises nvidia.com/gpu): no driver DaemonSet of ours.
            gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                gpu_driver_version="LATEST"
            ),
        )
    ]


class GkeNodePool(pulumi.ComponentResource):
    def __init__(self, name: str, args: GkeNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:serving:GkeNodePool", name, None, aliased(opts, "mlinfra:gke_node_pool:GkeNodePool"))
        plan = args.plan
        self.pool = gcp.container.NodePool(
            f"{name}-pool",
            cluster=args.cluster_id,
            location=args.region,
            initial_node_count=plan.initial_nodes_per_zone,
            node_locations=list(plan.node_locations) or None,
            # Total bounds over the pool's zones (min_node_count/max_node_count would be per zone: a minimum
            # of one L4 node would keep three). ANY takes capacity wherever a zone has it.
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                total_min_node_count=plan.min_nodes, total_max_node_count=plan.max_nodes, location_policy="ANY"
            ),
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            network_config=gcp.container.NodePoolNetworkConfigArgs(enable_private_nodes=True),
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=plan.machine_type,
                disk_size_gb=plan.disk_gib,
                disk_type="pd-balanced",
                image_type="COS_CONTAINERD",
                spot=plan.spot,
                service_account=args.service_account,
                oauth_scopes=list(gke.NODE_OAUTH_SCOPES),
                labels=dict(plan.labels),
                resource_labels=dict(args.labels),
                metadata={"disable-legacy-endpoints": "true"},
                taints=[gcp.container.NodePoolNodeConfigTaintArgs(**gke.gke_taint(t)) for t in plan.taints] or None,
                guest_accelerators=_accelerators(plan),
                shielded_instance_config=gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
                    enable_secure_boot=True, enable_integrity_monitoring=True
                ),
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                    mode="GKE_METADATA"
                ),
            ),
            # The cluster autoscaler owns the node count after creation.
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["initialNodeCount"]),
        )
        self.register_outputs({"name": self.pool.name})
