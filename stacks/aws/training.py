"""The `training` stack kind: one run on whole EFA nodes with FSx for Lustre, destroyed after the run."""

from __future__ import annotations

from datetime import UTC, datetime

import pulumi
import pulumi_aws as aws

from components.registry.aws.access import RegistryAccess
from components.training.aws.filesystem import RunFileSystem, RunFileSystemArgs
from components.training.aws.network import TrainingNetwork, TrainingNetworkArgs
from components.training.aws.node_role import NodeRole, NodeRoleArgs
from components.training.aws.nodes import TrainingNodes, TrainingNodesArgs
from components.training.aws.run_guard import RunGuard, RunGuardArgs
from components.training.aws.security import ClusterSecurity, ClusterSecurityArgs
from infra.training.aws.checks import registry_region_problem
from infra.training.aws.config import TrainingStackConfig
from infra.training.aws.plan import TrainingPlan, plan_training
from infra.training.aws.userdata import NodeBootstrap, render_user_data


def build(config: TrainingStackConfig) -> None:
    spec = config.training
    region = aws.get_region().region
    plan = plan_training(spec, region, pulumi.get_stack(), now=datetime.now(UTC), dry_run=pulumi.runtime.is_dry_run())
    _explain(plan)
    tags = plan.tags
    name = f"run-{plan.run_id}"

    registry = pulumi.StackReference(config.registry_stack)
    bucket = registry.require_output("bucketName")
    kms_key_arn = registry.require_output("kmsKeyArn")
    # The config check compares regions when the registry's stack file is in this project; for an
    # org/project/stack reference the program checks at deploy time, before anything is linked.
    checked_bucket = pulumi.Output.all(
        bucket, registry.require_output("region"), registry.get_output("eventBridge")
    ).apply(lambda values: _usable_registry(values[0], values[1], values[2], region, config.registry_stack))
    registry_access = RegistryAccess.from_stack_reference(registry)
    partition = aws.get_partition().partition
    account_id = aws.get_caller_identity().account_id

    # First, so a run that ends (or expires) early is always watched.
    run_guard = RunGuard(
        f"{name}-guard",
        RunGuardArgs(
            run_id=plan.run_id,
            expires_at=plan.expires_at,
            teardown_on_completion=plan.lifecycle.teardown_on_completion,
            export_checkpoints=plan.lifecycle.export_checkpoints,
            registry=registry_access,
            registry_bucket=checked_bucket,
            partition=partition,
            region=region,
            account_id=account_id,
            tags=tags,
        ),
    )

    # Everything that bills depends on the guard, so a destroy removes the guard last.
    guarded = pulumi.ResourceOptions(depends_on=[run_guard])
    network = TrainingNetwork(
        name,
        TrainingNetworkArgs(spec=spec.network, availability_zone=plan.availability_zone, region=region, tags=tags),
        opts=guarded,
    )
    security = ClusterSecurity(name, ClusterSecurityArgs(vpc_id=network.vpc_id, tags=tags))
    prefixes = plan.prefixes
    role = NodeRole(
        name,
        NodeRoleArgs(
            registry=registry_access,
            read_prefixes=(prefixes["datasets"],),
            write_prefixes=(prefixes["checkpoints"], prefixes["runs"]),  # models/ is promotion's alone
            partition=partition,
            tags=tags,
        ),
    )
    filesystem = RunFileSystem(
        name,
        RunFileSystemArgs(
            plan=plan.lustre,
            subnet_id=network.subnet_id,
            security_group_id=security.lustre.id,
            registry_bucket=checked_bucket,
            checkpoints_prefix=prefixes["checkpoints"] if plan.lifecycle.export_checkpoints else None,
            datasets_prefix=prefixes["datasets"],
            tags=tags,
            port_rules=security.lustre_rules,
        ),
        opts=guarded,
    )
    image_id = spec.ami_id or aws.ssm.get_parameter_output(name=plan.image.ssm_parameter).value
    # The SDK types the filter's values as plain strings; invokes resolve Outputs nested in their arguments.
    image = aws.ec2.get_ami_output(
        filters=[aws.ec2.GetAmiFilterArgs(name="image-id", values=[image_id])]  # type: ignore[list-item]
    )
    user_data = pulumi.Output.all(filesystem.dns_name, filesystem.mount_name, bucket, kms_key_arn).apply(
        lambda values: render_user_data(_bootstrap(plan, spec.job.command, spec.job.env, region, *values))
    )
    nodes = TrainingNodes(
        name,
        TrainingNodesArgs(
            plan=plan,
            subnet_id=network.subnet_id,
            security_group_id=security.nodes.id,
            instance_profile_arn=role.instance_profile.arn,
            image_id=image_id,
            root_device_name=image.root_device_name,
            root_volume_gib=spec.root_volume_gib,
            user_data=user_data,
            tags=tags,
            partition=partition,
            account_id=account_id,
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
            "guardFunction": run_guard.function.name,
        },
    )
    pulumi.export("lustreFileSystemId", filesystem.file_system.id)
    pulumi.export("instanceType", plan.itype.name)
    pulumi.export("nodeCount", plan.node_count)
    pulumi.export("availabilityZone", plan.availability_zone)
    pulumi.export("region", region)  # where the lifecycle commands look for the run, whatever the file says later
    pulumi.export("nodePrivateIps", nodes.private_ips)
    pulumi.export("rendezvousHost", nodes.private_ips.apply(lambda ips: ips[0] if ips else None))
    pulumi.export(
        "efa",
        {
            "devicesPerNode": plan.efa_devices,
            "ipBearingInterfaces": plan.ip_interfaces,
            "bandwidthShare": plan.fabric_share,
        },
    )
    pulumi.export("lustreDnsName", filesystem.dns_name)
    pulumi.export("lustreMountName", filesystem.mount_name)
    pulumi.export(
        "lustre",
        {
            "deploymentType": plan.lustre.deployment_type,
            "storageCapacityGib": plan.lustre.storage_capacity_gib,
            "perUnitStorageThroughput": plan.lustre.per_unit_storage_throughput,
            "reasons": list(plan.lustre.reasons),
        },
    )
    pulumi.export("registryBucket", bucket)
    pulumi.export("registryPrefixes", prefixes)


def _bootstrap(
    plan: TrainingPlan,
    command: list[str],
    env: dict[str, str],
    region: str,
    dns_name: str,
    mount_name: str,
    bucket: str,
    kms_key_arn: str,
) -> NodeBootstrap:
    return NodeBootstrap(
        run_id=plan.run_id,
        node_count=plan.node_count,
        generation=plan.generation,
        fabric_gate=plan.fabric_gate,
        image=plan.image.facts,
        accelerator_kind=plan.accelerator_kind,
        devices_per_node=plan.devices_per_node,
        processes_per_node=plan.processes_per_node,
        efa_devices=plan.efa_devices,
        lustre_dns_name=dns_name,
        lustre_mount_name=mount_name,
        registry_bucket=bucket,
        registry_region=region,
        registry_kms_key_id=kms_key_arn,
        command=tuple(command),
        env=env,
        torchrun=plan.torchrun,
        power_off_on_exit=plan.lifecycle.teardown_on_completion,
        export_checkpoints=plan.lifecycle.export_checkpoints,
        stop_at_epoch=plan.stop_at_epoch,
        expires_at_epoch=plan.expires_at_epoch,
    )


def _usable_registry(bucket: str, registry_region: str, events: object, region: str, registry_stack: str) -> str:
    """The bucket, once the registry is known to be in the run's region and to send object events
    (the run guard's completion rule hears nothing otherwise)."""
    problem = registry_region_problem(region, registry_region, registry_stack)
    if problem:
        raise pulumi.RunError(str(problem))
    if events is None:
        pulumi.log.warn(
            f"mlinfra:registryStack: registry stack {registry_stack!r} does not say whether it sends object "
            "events to EventBridge (it predates the eventBridge output); the run guard hears completion "
            "markers only if it does; update the registry stack to be sure"
        )
    if events is False:
        raise pulumi.RunError(
            f"mlinfra:registryStack: registry stack {registry_stack!r} does not send object events to "
            "EventBridge, so the run guard would never see the completion marker; set "
            "mlinfra:registry.eventBridge true there and update it"
        )
    return bucket


def _explain(plan: TrainingPlan) -> None:
    """Why the plan is what it is, in the preview's diagnostics."""
    pulumi.log.info(
        f"{plan.node_count} x {plan.itype.name} in {plan.availability_zone} ({plan.capacity_mode}); EFA on "
        f"{plan.efa_devices} cards ({plan.fabric_share:.0%} of node bandwidth), "
        f"{plan.ip_interfaces} IP per node; expires {plan.expires_at}"
        + (" (provisional: fixed when the run starts)" if plan.expires_at_provisional else "")
    )
    for reason in plan.lustre.reasons:
        pulumi.log.info(f"lustre: {reason}")
