"""A private GKE cluster: private nodes, the API private or limited to listed networks, Workload Identity,
shielded nodes, a release channel, no default node pool, and the nodes' own least-privilege account."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.aliases import aliased
from components.serving.gcp.network import PODS_RANGE, SERVICES_RANGE
from infra.core.labels import account_id
from infra.serving.gcp import gke
from infra.serving.gcp.config import GkeClusterSpec


@dataclass(frozen=True)
class GkeClusterArgs:
    spec: GkeClusterSpec
    cluster_name: str
    project: str
    region: str
    network_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    labels: Mapping[str, str]


def authorized_networks(spec: GkeClusterSpec) -> gcp.container.ClusterMasterAuthorizedNetworksConfigArgs:
    endpoint = spec.endpoint
    blocks = [
        gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(
            cidr_block=spec.network.nodes_cidr, display_name="nodes"
        )
    ]
    blocks += [
        gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(cidr_block=c, display_name=f"admin-{i}")
        for i, c in enumerate(endpoint.public_access_cidrs)
    ]
    return gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(cidr_blocks=blocks)


class GkeCluster(pulumi.ComponentResource):
    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:serving:GkeCluster", name, None, aliased(opts, "mlinfra:gke_cluster:GkeCluster"))
        child = pulumi.ResourceOptions(parent=self)
        spec = args.spec
        self.node_account = gcp.serviceaccount.Account(
            f"{name}-nodes",
            # The plain cut kept: the node pools' account cannot change without replacing them, and the cluster's
            # name is its stack's, one per project.
            account_id=account_id("gke-nodes", args.cluster_name, hashed=False),
            display_name=f"GKE nodes of {args.cluster_name}",
            opts=child,
        )
        for role in gke.NODE_ROLES:
            gcp.projects.IAMMember(
                f"{name}-nodes-{role.rsplit('/', 1)[-1].replace('.', '-').lower()}",
                project=args.project,
                role=role,
                member=self.node_account.email.apply(lambda e: f"serviceAccount:{e}"),
                opts=pulumi.ResourceOptions(parent=self.node_account),
            )
        calico = (
            gcp.container.ClusterNetworkPolicyArgs(enabled=True, provider="CALICO")
            if spec.network_policy == "calico"
            else None
        )
        self.cluster = gcp.container.Cluster(
            f"{name}-cluster",
            name=args.cluster_name,
            location=args.region,
            network=args.network_id,
            subnetwork=args.subnet_id,
            networking_mode="VPC_NATIVE",
            # Node pools are separate resources; the default pool is removed once the cluster exists.
            remove_default_node_pool=True,
            initial_node_count=1,
            deletion_protection=True,  # long-lived: destroying it must be asked for by turning this off
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel=spec.release_channel),
            ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                cluster_secondary_range_name=PODS_RANGE, services_secondary_range_name=SERVICES_RANGE
            ),
            private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
                enable_private_nodes=True,
                enable_private_endpoint=spec.endpoint.access == "private",
                master_ipv4_cidr_block=spec.network.master_cidr,
            ),
            master_authorized_networks_config=authorized_networks(spec),
            master_auth=gcp.container.ClusterMasterAuthArgs(
                client_certificate_config=gcp.container.ClusterMasterAuthClientCertificateConfigArgs(
                    issue_client_certificate=False
                )
            ),
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                workload_pool=gke.workload_pool(args.project)
            ),
            enable_shielded_nodes=True,
            # NetworkPolicies enforced (the model servers admit the gateway only): by Dataplane V2, or by GKE's
            # managed Calico (its add-on and the cluster's switch together) on a cluster created without it.
            datapath_provider="ADVANCED_DATAPATH" if calico is None else None,
            network_policy=calico,
            # Model servers mount their artefact from GCS with the Cloud Storage FUSE CSI driver (vLLM's
            # streamer reads only s3:// in the pinned releases).
            addons_config=gcp.container.ClusterAddonsConfigArgs(
                gcs_fuse_csi_driver_config=gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(enabled=True),
                network_policy_config=(
                    gcp.container.ClusterAddonsConfigNetworkPolicyConfigArgs(disabled=False) if calico else None
                ),
            ),
            resource_labels=dict(args.labels),
            opts=child,
        )
        self.kubeconfig = pulumi.Output.all(self.cluster.endpoint, self.cluster.master_auth).apply(
            lambda v: gke.kubeconfig(args.cluster_name, v[0], (v[1] or {}).get("cluster_ca_certificate", ""))
        )
        self.register_outputs({"name": self.cluster.name, "endpoint": self.cluster.endpoint})
