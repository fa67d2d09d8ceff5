"""The run's nodes: one launch template with the full EFA layout, and an `instant` EC2 Fleet that
launches all `nodeCount` nodes or none, in one AZ, in a cluster placement group when on-demand."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from infra.training.aws.plan import TrainingPlan
from infra.training.aws.reservation import POOL_CONFIGURATION, capacity_reservation_arn
from infra.training.aws.userdata import user_data_base64

TAGGED_AT_LAUNCH = ("instance", "volume", "network-interface")


@dataclass(frozen=True)
class TrainingNodesArgs:
    plan: TrainingPlan
    subnet_id: pulumi.Input[str]
    security_group_id: pulumi.Input[str]
    instance_profile_arn: pulumi.Input[str]
    image_id: pulumi.Input[str]
    root_device_name: pulumi.Input[str]
    root_volume_gib: int
    user_data: pulumi.Input[str]  # the rendered bootstrap script (plain text)
    tags: Mapping[str, str]
    partition: str  # for the reservation's ARN (odcr)
    account_id: str


class TrainingNodes(pulumi.ComponentResource):
    private_ips: pulumi.Output[list]

    def __init__(self, name: str, args: TrainingNodesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:training:Nodes", name, None, opts)
        plan, tags = args.plan, dict(args.tags)
        child = pulumi.ResourceOptions(parent=self)

        self.placement_group = None
        if plan.placement_strategy:
            self.placement_group = aws.ec2.PlacementGroup(
                f"{name}-placement", strategy=plan.placement_strategy, tags=tags, opts=child
            )
        self.reservation_group, membership = self._reservation_group(name, args)
        self.launch_template = aws.ec2.LaunchTemplate(
            f"{name}-template",
            description=f"mlinfra training run {plan.run_id}: {plan.itype.name}, EFA on every card",
            image_id=args.image_id,
            instance_type=plan.itype.name,
            iam_instance_profile=aws.ec2.LaunchTemplateIamInstanceProfileArgs(arn=args.instance_profile_arn),
            network_interfaces=[
                aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                    network_card_index=interface.network_card_index,
                    device_index=interface.device_index,
                    interface_type=interface.interface_type,
                    subnet_id=args.subnet_id,
                    security_groups=[args.security_group_id],
                    # No associate_public_ip_address: EC2 rejects it with several interfaces
                    # (InvalidParameterCombination); the subnet maps no public IPs instead.
                    delete_on_termination="true",
                )
                for interface in plan.layout
            ],
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled",
                http_tokens="required",
                http_put_response_hop_limit=1,
                instance_metadata_tags="disabled",
            ),
            block_device_mappings=[
                aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                    device_name=args.root_device_name,
                    ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                        volume_size=args.root_volume_gib,
                        volume_type="gp3",
                        encrypted="true",
                        delete_on_termination="true",
                    ),
                )
            ],
            ebs_optimized="true",
            # A node that powers itself off stops billing for good instead of sitting stopped.
            instance_initiated_shutdown_behavior="terminate",
            placement=aws.ec2.LaunchTemplatePlacementArgs(
                availability_zone=plan.availability_zone,
                group_name=self.placement_group.name if self.placement_group else None,
            ),
            instance_market_options=(
                aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type=plan.market_type)
                if plan.market_type
                else None
            ),
            capacity_reservation_specification=(
                aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
                    capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                        capacity_reservation_id=plan.reservation_id if plan.reservation_target == "id" else None,
                        capacity_reservation_resource_group_arn=(
                            self.reservation_group.arn if self.reservation_group else None
                        ),
                    ),
                )
                if plan.reservation_target
                else None
            ),
            # gzip-compressed (cloud-init decompresses it) to fit EC2's 16 KB user data limit
            user_data=pulumi.Output.from_input(args.user_data).apply(user_data_base64),
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(
                    resource_type=kind, tags={**tags, "Name": f"{name}-{plan.run_id}"}
                )
                for kind in TAGGED_AT_LAUNCH
            ],
            update_default_version=True,
            tags=tags,
            opts=child,
        )
        self.fleet = aws.ec2.Fleet(
            f"{name}-fleet",
            type="instant",
            launch_template_configs=[
                aws.ec2.FleetLaunchTemplateConfigArgs(
                    launch_template_specification=aws.ec2.FleetLaunchTemplateConfigLaunchTemplateSpecificationArgs(
                        launch_template_id=self.launch_template.id,
                        version=self.launch_template.latest_version.apply(str),
                    ),
                    overrides=[
                        aws.ec2.FleetLaunchTemplateConfigOverrideArgs(
                            availability_zone=plan.availability_zone,
                            instance_type=plan.itype.name,
                        )
                    ],
                )
            ],
            target_capacity_specification=aws.ec2.FleetTargetCapacitySpecificationArgs(
                default_target_capacity_type=plan.fleet_capacity_type,
                total_target_capacity=plan.node_count,
            ),
            on_demand_options=_on_demand_options(plan),
            # Deleting the fleet (pulumi destroy, or a replacement) terminates its nodes.
            terminate_instances=True,
            tags=tags,
            opts=pulumi.ResourceOptions(
                parent=self,
                # The reservation must be in the group before the fleet asks for it.
                depends_on=[membership] if membership else None,
                # EC2 cannot modify an instant fleet: a new node count or type replaces it (old nodes
                # first). A new template version alone (a newer DLAMI, new user data) leaves running
                # nodes alone instead of restarting the job.
                replace_on_changes=["targetCapacitySpecification", "launchTemplateConfigs[0].overrides"],
                delete_before_replace=True,
                ignore_changes=["launchTemplateConfigs[0].launchTemplateSpecification.version"],
            ),
        )
        dry_run = pulumi.runtime.is_dry_run()
        instance_ids = self.fleet.fleet_instance_sets.apply(
            lambda sets: launched_instances(sets, plan.node_count, dry_run)
        )
        # Sorted as the bootstrap sorts them (byte order, LC_ALL=C): private_ips[0] is rank 0.
        self.private_ips = instance_ids.apply(_private_ips)
        self.register_outputs(
            {"fleetId": self.fleet.id, "launchTemplateId": self.launch_template.id, "privateIps": self.private_ips}
        )

    def _reservation_group(
        self, name: str, args: TrainingNodesArgs
    ) -> tuple[aws.resourcegroups.Group | None, aws.resourcegroups.Resource | None]:
        """An ODCR's own resource group holding the reservation, which the launch template targets (None
        for the other capacity modes). Deleting the stack removes the group, never the reservation."""
        plan = args.plan
        if plan.reservation_target != "group" or not plan.reservation_id:
            return None, None
        child = pulumi.ResourceOptions(parent=self)
        group = aws.resourcegroups.Group(
            f"{name}-reservations",
            description=f"mlinfra training run {plan.run_id}: the capacity reservation its fleet launches into",
            configurations=[
                aws.resourcegroups.GroupConfigurationArgs(
                    type=kind,
                    parameters=[
                        aws.resourcegroups.GroupConfigurationParameterArgs(name=key, values=list(values))
                        for key, values in parameters.items()
                    ]
                    or None,
                )
                for kind, parameters in POOL_CONFIGURATION
            ],
            tags=dict(args.tags),
            opts=child,
        )
        membership = aws.resourcegroups.Resource(
            f"{name}-reservation",
            group_arn=group.arn,
            resource_arn=capacity_reservation_arn(args.partition, plan.region, args.account_id, plan.reservation_id),
            opts=child,
        )
        return group, membership


def launched_instances(sets: Sequence[Any] | None, expected: int, dry_run: bool) -> list[str]:
    """The fleet's instance ids, sorted; on `up`, anything but `expected` fails the deployment. The
    provider does not read CreateFleet's errors, so a fleet that got no capacity (or part of a
    Capacity Block) would otherwise count as created while the file system and NAT keep billing."""
    # The SDK's FleetFleetInstanceSet is a dict keyed by the Python names, like the plain dicts of tests.
    ids = sorted(i for s in (sets or []) for i in (s.get("instance_ids") or []))
    if not dry_run and len(ids) != expected:
        raise pulumi.RunError(
            f"the fleet launched {len(ids)} of {expected} nodes (insufficient capacity, a Capacity Block not yet "
            "active, or the new instance profile not yet visible); tear the run down and start it again"
        )
    return ids


def _on_demand_options(plan: TrainingPlan) -> aws.ec2.FleetOnDemandOptionsArgs | None:
    """All or nothing: an instant fleet launches no instance unless it can launch min_target_capacity,
    in one AZ and of one type. Capacity Blocks take no on-demand options (EC2 Fleet capacity-block
    walkthrough); the block itself holds the nodes, and nodeCount is checked against reservedCount."""
    if plan.capacity_mode == "capacity-block":
        return None
    return aws.ec2.FleetOnDemandOptionsArgs(
        min_target_capacity=plan.node_count,
        single_availability_zone=True,
        single_instance_type=True,
        capacity_reservation_options=(
            aws.ec2.FleetOnDemandOptionsCapacityReservationOptionsArgs(usage_strategy="use-capacity-reservations-first")
            if plan.capacity_mode == "odcr"
            else None
        ),
    )


def _private_ips(instance_ids: list[str]):
    if not instance_ids:
        return []
    found = aws.ec2.get_instances_output(
        filters=[aws.ec2.GetInstancesFilterArgs(name="instance-id", values=instance_ids)],
        instance_state_names=["pending", "running"],
    )
    return found.private_ips.apply(sorted)
