"""The AWS Load Balancer Controller: it turns the gateway proxies' Service into a Network Load Balancer. Its pod
identity carries the controller's own published policy for its release."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi

from components.serving.aws.pod_identity import pod_identity_role
from components.serving.helm_release import helm_release
from infra.serving.aws import front_door, iam
from infra.serving.charts import SYSTEM_NODES


@dataclass(frozen=True)
class LoadBalancerControllerArgs:
    cluster_name: pulumi.Input[str]
    cluster_name_plain: str  # for values and trust policies that must be known at declaration
    region: str
    account_id: str
    partition: str
    vpc_id: pulumi.Input[str]
    tags: Mapping[str, str]
    after: Sequence[pulumi.Resource] = field(default_factory=list)  # node pools (its pods need nodes)


class LoadBalancerController(pulumi.ComponentResource):
    """AWS resources use the default provider; the chart the Kubernetes provider passed in opts.providers."""

    def __init__(self, name: str, args: LoadBalancerControllerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:serving:LoadBalancerController", name, None, opts)
        chart = front_door.LOAD_BALANCER_CONTROLLER
        scope = iam.PodScope(args.cluster_name_plain, chart.namespace, front_door.LOAD_BALANCER_CONTROLLER_ACCOUNT)
        policy = pulumi.Output.from_input(args.vpc_id).apply(
            lambda vpc_id: json.dumps(
                front_door.load_balancer_controller_policy(args.region, args.account_id, args.partition, vpc_id)
            )
        )
        role, identity = pod_identity_role(name, scope, policy, args.cluster_name, args.tags, self)
        self.release = helm_release(
            f"{name}-chart",
            chart,
            front_door.load_balancer_controller_values(args.cluster_name_plain, args.region, args.vpc_id, SYSTEM_NODES),
            self,
            [*args.after, identity],
        )
        self.register_outputs({"roleArn": role.arn})
