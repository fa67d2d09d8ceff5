"""The network of a GCP training run, as Google's A3 blueprints lay it out: a primary VPC (MTU 8244) whose
subnet carries nic0, Managed Lustre's clients and Cloud NAT egress; one VPC + subnet per GPU NIC (MTU 8244)
with a firewall rule allowing all traffic from inside that subnet only; and private services access for
Managed Lustre. No rule admits an address range outside the run's own subnets."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.aliases import aliased
from infra.training.gcp.plan import GPU_MTU, GcpTrainingPlan

ALL = [gcp.compute.FirewallAllowArgs(protocol=p) for p in ("tcp", "udp", "icmp")]


@dataclass(frozen=True)
class GcpTrainingNetworkArgs:
    plan: GcpTrainingPlan
    prefix: str  # physical-name prefix of the run's networks: mlinfra-<run-id>
    labels: Mapping[str, str]


class GcpTrainingNetwork(pulumi.ComponentResource):
    def __init__(self, name: str, args: GcpTrainingNetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(
            "mlinfra:training:GcpTrainingNetwork",
            name,
            None,
            aliased(opts, "mlinfra:gcp_training_network:GcpTrainingNetwork"),
        )
        child = pulumi.ResourceOptions(parent=self)
        plan, prefix = args.plan, args.prefix
        self.network = gcp.compute.Network(
            f"{name}-vpc",
            name=f"{prefix}-net",
            auto_create_subnetworks=False,
            mtu=GPU_MTU,
            routing_mode="REGIONAL",
            description=f"mlinfra run {plan.run_id}: nic0 and Managed Lustre",
            opts=child,
        )
        self.subnet = gcp.compute.Subnetwork(
            f"{name}-subnet",
            name=f"{prefix}-sub",
            network=self.network.id,
            region=plan.region,
            ip_cidr_range=plan.primary_cidr,
            private_ip_google_access=True,
            opts=child,
        )
        gcp.compute.Firewall(
            f"{name}-internal",
            name=f"{prefix}-internal",
            network=self.network.id,
            direction="INGRESS",
            source_ranges=[plan.primary_cidr, plan.lustre_cidr],
            allows=ALL,
            description="rendezvous, torchrun and Lustre between the run's nodes and file system",
            opts=child,
        )
        router = gcp.compute.Router(
            f"{name}-router", name=f"{prefix}-router", network=self.network.id, region=plan.region, opts=child
        )
        gcp.compute.RouterNat(
            f"{name}-nat",
            name=f"{prefix}-nat",
            router=router.name,
            region=plan.region,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
            subnetworks=[
                gcp.compute.RouterNatSubnetworkArgs(name=self.subnet.id, source_ip_ranges_to_nats=["ALL_IP_RANGES"])
            ],
            log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
            opts=pulumi.ResourceOptions(parent=router),
        )
        self.gpu_subnets: list[gcp.compute.Subnetwork] = []
        for nic in plan.gpu_nics:
            net = gcp.compute.Network(
                f"{name}-gpu{nic.index}",
                name=f"{prefix}-gpunet-{nic.index}",
                auto_create_subnetworks=False,
                mtu=GPU_MTU,
                routing_mode="REGIONAL",
                description=f"mlinfra run {plan.run_id}: GPU NIC {nic.index}",
                opts=child,
            )
            within = pulumi.ResourceOptions(parent=net)
            self.gpu_subnets.append(
                gcp.compute.Subnetwork(
                    f"{name}-gpu{nic.index}-subnet",
                    name=f"{prefix}-gpunet-{nic.index}-sub",
                    network=net.id,
                    region=plan.region,
                    ip_cidr_range=nic.cidr,
                    opts=within,
                )
            )
            gcp.compute.Firewall(
                f"{name}-gpu{nic.index}-internal",
                name=f"{prefix}-gpunet-{nic.index}-internal",
                network=net.id,
                direction="INGRESS",
                source_ranges=[nic.cidr],
                allows=ALL,
                description="GPU-to-GPU traffic between the run's nodes",
                opts=within,
            )
        # Managed Lustre is reached through private services access: a reserved range peered to Google.
        lustre_range = ipaddress.IPv4Network(plan.lustre_cidr)
        self.lustre_range = gcp.compute.GlobalAddress(
            f"{name}-lustre-range",
            name=f"{prefix}-lustre",
            purpose="VPC_PEERING",
            address_type="INTERNAL",
            address=str(lustre_range.network_address),
            prefix_length=lustre_range.prefixlen,
            network=self.network.id,
            labels=dict(args.labels),
            opts=child,
        )
        self.peering = gcp.servicenetworking.Connection(
            f"{name}-lustre-peering",
            network=self.network.id,
            service="servicenetworking.googleapis.com",
            reserved_peering_ranges=[self.lustre_range.name],
            opts=child,
        )
        self.register_outputs(
            {"network": self.network.id, "subnet": self.subnet.id, "gpuSubnets": [s.id for s in self.gpu_subnets]}
        )
