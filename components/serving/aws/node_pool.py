"""One node group of a pool (one instance type): an EKS managed node group on an IMDSv2-only, encrypted launch
template, its Auto Scaling group tagged with the cluster autoscaler's node template (scale from zero)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.aliases import aliased
from infra.serving.aws.node_pools import (
    EKS_EFFECT,
    NODE_GROUP_SUFFIX,
    TEMPLATE_PREFIX,
    NodePoolPlan,
    launch_template_metadata,
)


@dataclass(frozen=True)
class ServingNodePoolArgs:
    plan: NodePoolPlan
    cluster_name: pulumi.Input[str]
    node_role_arn: pulumi.Input[str]
    subnet_ids: Sequence[pulumi.Input[str]]
    tags: Mapping[str, str]


class ServingNodePool(pulumi.ComponentResource):
    def __init__(self, name: str, args: ServingNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(
            "mlinfra:serving:ServingNodePool", name, None, aliased(opts, "mlinfra:serving_node_pool:ServingNodePool")
        )
        plan, tags = args.plan, dict(args.tags)
        instance_tags = {**tags, "Name": name}
        self.launch_template = aws.ec2.LaunchTemplate(
            f"{name}-lt",
            description=f"mlinfra {plan.family} serving nodes ({plan.instance_type})",
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(**launch_template_metadata()),
            block_device_mappings=[
                aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                    device_name="/dev/xvda",
                    ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                        volume_size=plan.disk_gib, volume_type="gp3", encrypted="true", delete_on_termination="true"
                    ),
                )
            ],
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=instance_tags)
                for kind in ("instance", "volume", "network-interface")
            ],
            update_default_version=True,
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.node_group = aws.eks.NodeGroup(
            name + NODE_GROUP_SUFFIX,
            cluster_name=args.cluster_name,
            node_role_arn=args.node_role_arn,
            subnet_ids=list(args.subnet_ids),
            instance_types=[plan.instance_type],
            capacity_type=plan.capacity_type,
            ami_type=plan.ami_type,
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=plan.min_size, max_size=plan.max_size, desired_size=plan.desired_size
            ),
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            labels=plan.labels,
            taints=[
                aws.eks.NodeGroupTaintArgs(key=t.key, value=t.value, effect=EKS_EFFECT[t.effect]) for t in plan.taints
            ],
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=self.launch_template.id, version=self.launch_template.latest_version.apply(str)
            ),
            tags=tags,
            # The cluster autoscaler owns the size between min and max once the group exists.
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["scalingConfig.desiredSize"]),
        )
        # The group's Auto Scaling group is EKS's: tag it (not at launch) so the autoscaler sees what an empty
        # group's nodes would offer: accelerators, labels, taints.
        group_name = self.node_group.resources.apply(_autoscaling_group_name)
        for key, value in plan.template_tags().items():
            aws.autoscaling.Tag(
                f"{name}-{re.sub('[^a-z0-9]+', '-', key.removeprefix(TEMPLATE_PREFIX + '/').lower())}",
                autoscaling_group_name=group_name,
                tag=aws.autoscaling.TagTagArgs(key=key, value=value, propagate_at_launch=False),
                opts=pulumi.ResourceOptions(parent=self.node_group),
            )
        self.register_outputs({"nodeGroupName": self.node_group.node_group_name})


def _autoscaling_group_name(resources: Sequence[aws.eks.outputs.NodeGroupResource]) -> str:
    groups = resources[0].autoscaling_groups or []
    return groups[0].name or ""
