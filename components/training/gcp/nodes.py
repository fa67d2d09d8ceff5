"""The GCP training nodes: a compact placement policy (collocation COLLOCATED, vmCount = nodes) and one
instance per node in it, each with nic0 on the primary subnet and one gVNIC per GPU NIC on its own GPU VPC
(no access configs: no public IPs), the run's startup script, its service account, Shielded VM (vTPM and
integrity monitoring; secure boot off because the GPUDirect-TCPX kernel and NVIDIA modules are not signed
for it), GPUs that TERMINATE on host maintenance, and a hard end: terminationTime = expires-at with
instanceTerminationAction DELETE, so Compute Engine deletes every node at expires-at whatever else fails."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.aliases import aliased
from infra.training.gcp.plan import NIC_TYPE, GcpTrainingPlan

SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]  # access decided by IAM on the account


@dataclass(frozen=True)
class GcpTrainingNodesArgs:
    plan: GcpTrainingPlan
    prefix: str
    subnet_id: pulumi.Input[str]
    gpu_subnet_ids: Sequence[pulumi.Input[str]]
    service_account_email: pulumi.Input[str]
    startup_script: pulumi.Input[str]
    labels: Mapping[str, str]


def scheduling(plan: GcpTrainingPlan) -> gcp.compute.InstanceSchedulingArgs:
    return gcp.compute.InstanceSchedulingArgs(
        provisioning_model="STANDARD",
        on_host_maintenance="TERMINATE",
        automatic_restart=False,
        termination_time=plan.termination_time,
        instance_termination_action="DELETE",
    )


def network_interfaces(subnet_id, gpu_subnet_ids) -> list[gcp.compute.InstanceNetworkInterfaceArgs]:
    """nic0 on the primary subnet, then one per GPU NIC, all gVNIC and without access configs."""
    return [
        gcp.compute.InstanceNetworkInterfaceArgs(subnetwork=s, nic_type=NIC_TYPE) for s in [subnet_id, *gpu_subnet_ids]
    ]


class GcpTrainingNodes(pulumi.ComponentResource):
    def __init__(self, name: str, args: GcpTrainingNodesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(
            "mlinfra:training:GcpTrainingNodes",
            name,
            None,
            aliased(opts, "mlinfra:gcp_training_nodes:GcpTrainingNodes"),
        )
        child = pulumi.ResourceOptions(parent=self)
        plan = args.plan
        self.placement = gcp.compute.ResourcePolicy(
            f"{name}-placement",
            name=f"{args.prefix}-compact",
            region=plan.region,
            description=f"mlinfra run {plan.run_id}: every node close to the others",
            group_placement_policy=gcp.compute.ResourcePolicyGroupPlacementPolicyArgs(
                collocation="COLLOCATED", vm_count=plan.node_count
            ),
            opts=child,
        )
        self.instances = [
            gcp.compute.Instance(
                f"{name}-node-{i}",
                name=f"{args.prefix}-node-{i}",
                zone=plan.zone,
                machine_type=plan.mtype.name,
                boot_disk=gcp.compute.InstanceBootDiskArgs(
                    auto_delete=True,
                    initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                        image=plan.image, size=plan.boot_disk_gib, type="pd-balanced", labels=dict(args.labels)
                    ),
                ),
                network_interfaces=network_interfaces(args.subnet_id, args.gpu_subnet_ids),
                resource_policies=self.placement.self_link,  # one policy per instance (a string in pulumi-gcp 10)
                scheduling=scheduling(plan),
                service_account=gcp.compute.InstanceServiceAccountArgs(email=args.service_account_email, scopes=SCOPES),
                shielded_instance_config=gcp.compute.InstanceShieldedInstanceConfigArgs(
                    enable_secure_boot=False, enable_vtpm=True, enable_integrity_monitoring=True
                ),
                metadata={"enable-oslogin": "TRUE", "block-project-ssh-keys": "TRUE"},
                metadata_startup_script=args.startup_script,
                labels=dict(args.labels),
                opts=child,
            )
            for i in range(plan.node_count)
        ]
        self.private_ips = pulumi.Output.all(*[n.network_interfaces[0].network_ip for n in self.instances]).apply(
            lambda ips: sorted(ip for ip in ips if ip)
        )  # as the bootstrap sorts them (LC_ALL=C): [0] is rank 0
        self.register_outputs({"placement": self.placement.id, "privateIps": self.private_ips})
