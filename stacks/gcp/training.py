"""The `training` stack kind on GCP (`mlinfra:cloud: gcp`): one run on whole A3 nodes in a compact placement
policy with the A3 GPU NIC layout, Managed Lustre in the same zone, and a hard end at expires-at."""

from __future__ import annotations

from datetime import UTC, datetime

import pulumi

from components.training.gcp.filesystem import GcpRunFileSystem, GcpRunFileSystemArgs
from components.training.gcp.network import GcpTrainingNetwork, GcpTrainingNetworkArgs
from components.training.gcp.node_account import GcpNodeAccount, GcpNodeAccountArgs
from components.training.gcp.nodes import GcpTrainingNodes, GcpTrainingNodesArgs
from components.training.gcp.run_guard import GcpRunGuard, GcpRunGuardArgs
from infra.catalog.fabric import gcp_net_plugin
from infra.core.labels import account_id
from infra.training.gcp.config import GcpTrainingStackConfig
from infra.training.gcp.plan import GcpTrainingPlan, lustre_instance_name, plan_gcp_training, run_resource_prefix
from infra.training.gcp.startup import GcpNodeBootstrap, render_startup_script


def build(config: GcpTrainingStackConfig) -> None:
    spec = config.training
    provider_config = pulumi.Config("gcp")
    project, region = provider_config.require("project"), provider_config.require("region")
    plan = plan_gcp_training(
        spec, region, pulumi.get_stack(), now=datetime.now(UTC), dry_run=pulumi.runtime.is_dry_run()
    )
    _explain(plan)
    labels, name, prefix = plan.labels, f"run-{plan.run_id}", run_resource_prefix(plan.run_id)

    lustre_instance = lustre_instance_name(project, plan.zone, plan.run_id)
    # First, so a run that ends (or expires) early is always watched; everything that bills depends on it, so a
    # destroy removes the guard last.
    run_guard = GcpRunGuard(
        f"{name}-guard",
        GcpRunGuardArgs(
            run_id=plan.run_id,
            project=project,
            region=region,
            zone=plan.zone,
            data_bucket=plan.data_bucket,
            lustre_instance=lustre_instance,
            expires_at=plan.expires_at,
            teardown_on_completion=plan.lifecycle.teardown_on_completion,
            export_checkpoints=plan.lifecycle.export_checkpoints,
            labels=labels,
        ),
    )
    guarded = pulumi.ResourceOptions(depends_on=[run_guard])
    network = GcpTrainingNetwork(name, GcpTrainingNetworkArgs(plan=plan, prefix=prefix, labels=labels), opts=guarded)
    prefixes = plan.prefixes
    account = GcpNodeAccount(
        name,
        GcpNodeAccountArgs(
            account_id=account_id("train", plan.run_id),
            project=project,
            bucket=plan.data_bucket,
            read_prefixes=(prefixes["datasets"],),
            write_prefixes=(prefixes["checkpoints"], prefixes["runs"]),
        ),
    )
    filesystem = GcpRunFileSystem(
        name,
        GcpRunFileSystemArgs(
            plan=plan.lustre, instance_id=prefix, zone=plan.zone, network_id=network.network.id, labels=labels
        ),
        opts=pulumi.ResourceOptions(depends_on=[network.peering, run_guard]),
    )
    script = filesystem.mount_point.apply(lambda mount: render_startup_script(_bootstrap(plan, spec, mount)))
    nodes = GcpTrainingNodes(
        name,
        GcpTrainingNodesArgs(
            plan=plan,
            prefix=prefix,
            subnet_id=network.subnet.id,
            gpu_subnet_ids=[s.id for s in network.gpu_subnets],
            service_account_email=account.account.email,
            startup_script=script,
            labels=labels,
        ),
        opts=pulumi.ResourceOptions(depends_on=[filesystem, run_guard]),
    )

    pulumi.export("runId", plan.run_id)
    pulumi.export("expiresAt", plan.expires_at)
    pulumi.export(
        "lifecycle",
        {
            "ttlHours": plan.lifecycle.ttl_hours,
            "gracePeriodMinutes": plan.lifecycle.grace_period_minutes,
            "teardownOnCompletion": plan.lifecycle.teardown_on_completion,
            "exportCheckpoints": plan.lifecycle.export_checkpoints,
            "terminationTime": plan.termination_time,
            "terminationAction": "DELETE",
            "guardFunction": run_guard.function.name,
        },
    )
    pulumi.export("machineType", plan.mtype.name)
    pulumi.export("nodeCount", plan.node_count)
    pulumi.export("zone", plan.zone)
    pulumi.export("placementPolicy", nodes.placement.self_link)
    pulumi.export(
        "gpuNics",
        {
            "perNode": len(plan.gpu_nics),
            "networking": plan.mtype.gpu_networking,
            "subnets": [n.cidr for n in plan.gpu_nics],
        },
    )
    pulumi.export("nodePrivateIps", nodes.private_ips)
    pulumi.export("rendezvousHost", nodes.private_ips.apply(lambda ips: ips[0] if ips else None))
    pulumi.export("lustreMountPoint", filesystem.mount_point)
    pulumi.export("lustreInstanceId", lustre_instance)
    pulumi.export(
        "lustre",
        {
            "perUnitStorageThroughput": plan.lustre.per_unit_storage_throughput,
            "capacityGib": plan.lustre.capacity_gib,
            "reasons": list(plan.lustre.reasons),
        },
    )
    pulumi.export("dataBucket", plan.data_bucket)
    pulumi.export("bucketPrefixes", prefixes)
    pulumi.export("labels", labels)


def _bootstrap(plan: GcpTrainingPlan, spec, mount_point: str) -> GcpNodeBootstrap:
    return GcpNodeBootstrap(
        run_id=plan.run_id,
        node_count=plan.node_count,
        generation=plan.generation,
        fabric_gate=plan.fabric_gate,
        gpus_per_node=plan.processes_per_node,
        gpu_nics=len(plan.gpu_nics),
        machine_type=plan.mtype.name,
        gpu_subnets=tuple(n.cidr for n in plan.gpu_nics),
        net_plugin=gcp_net_plugin(plan.mtype.name),
        lustre_mount_point=mount_point,
        bucket=plan.data_bucket,
        command=tuple(spec.job.command),
        env=spec.job.env,
        torchrun=spec.job.torchrun_path or "torchrun",
        power_off_on_exit=plan.lifecycle.teardown_on_completion,
        export_checkpoints=plan.lifecycle.export_checkpoints,
        stop_at_epoch=plan.stop_at_epoch,
        expires_at_epoch=plan.expires_at_epoch,
    )


def _explain(plan: GcpTrainingPlan) -> None:
    pulumi.log.info(
        f"{plan.node_count} x {plan.mtype.name} in {plan.zone} (compact placement); nic0 + "
        f"{len(plan.gpu_nics)} GPU NICs "
        f"({plan.mtype.gpu_networking}) each in its own VPC; deleted by Compute Engine at {plan.expires_at}"
        + (" (provisional: fixed when the run starts)" if plan.expires_at_provisional else "")
    )
    for reason in plan.lustre.reasons:
        pulumi.log.info(f"lustre: {reason}")
