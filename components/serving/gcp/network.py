"""The serving VPC on GCP: one custom-mode network, a node subnet with secondary ranges for pods and
services (VPC-native GKE), and Cloud NAT on a Cloud Router for egress of the private nodes."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.aliases import aliased
from infra.serving.gcp.config import GkeNetworkSpec

PODS_RANGE = "pods"
SERVICES_RANGE = "services"


@dataclass(frozen=True)
class GkeNetworkArgs:
    spec: GkeNetworkSpec
    region: str


class GkeNetwork(pulumi.ComponentResource):
    def __init__(self, name: str, args: GkeNetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:serving:GkeNetwork", name, None, aliased(opts, "mlinfra:gke_network:GkeNetwork"))
        child = pulumi.ResourceOptions(parent=self)
        spec = args.spec
        self.network = gcp.compute.Network(
            f"{name}-vpc",
            auto_create_subnetworks=False,
            routing_mode="REGIONAL",
            description="mlinfra serving network",
            opts=child,
        )
        self.subnet = gcp.compute.Subnetwork(
            f"{name}-nodes",
            network=self.network.id,
            region=args.region,
            ip_cidr_range=spec.nodes_cidr,
            # Nodes without external IPs still reach Google APIs (GCS, Artifact Registry) privately.
            private_ip_google_access=True,
            secondary_ip_ranges=[
                gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=PODS_RANGE, ip_cidr_range=spec.pods_cidr),
                gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=SERVICES_RANGE, ip_cidr_range=spec.services_cidr),
            ],
            log_config=gcp.compute.SubnetworkLogConfigArgs(
                aggregation_interval="INTERVAL_5_MIN", flow_sampling=0.1, metadata="INCLUDE_ALL_METADATA"
            ),
            opts=child,
        )
        router = gcp.compute.Router(f"{name}-router", network=self.network.id, region=args.region, opts=child)
        self.nat = gcp.compute.RouterNat(
            f"{name}-nat",
            router=router.name,
            region=args.region,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
            subnetworks=[
                gcp.compute.RouterNatSubnetworkArgs(name=self.subnet.id, source_ip_ranges_to_nats=["ALL_IP_RANGES"])
            ],
            log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
            opts=pulumi.ResourceOptions(parent=router),
        )
        self.register_outputs({"network": self.network.id, "subnet": self.subnet.id})
