"""The EKS control plane: KMS-encrypted secrets, logged control plane, access entries, core add-ons."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.aliases import aliased
from infra.serving.aws import eks, iam
from infra.serving.aws.config import ClusterSpec


@dataclass(frozen=True)
class EksClusterArgs:
    spec: ClusterSpec
    cluster_name: str
    subnet_ids: Sequence[pulumi.Input[str]]
    region: str
    tags: Mapping[str, str]
    partition: str = "aws"  # the region's (aws-us-gov, aws-cn): ARNs of AWS's managed policies name it


def _role(
    name: str, trust: dict, policies: Sequence[str], tags: dict, parent: pulumi.Resource, partition: str
) -> aws.iam.Role:
    role = aws.iam.Role(
        name, assume_role_policy=json.dumps(trust), tags=tags, opts=pulumi.ResourceOptions(parent=parent)
    )
    for policy in policies:
        aws.iam.RolePolicyAttachment(
            f"{name}-{policy.lower().replace('_', '-')}",
            role=role.name,
            policy_arn=iam.managed_policy_arn(policy, partition),
            opts=pulumi.ResourceOptions(parent=role),
        )
    return role


class EksCluster(pulumi.ComponentResource):
    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:serving:EksCluster", name, None, aliased(opts, "mlinfra:eks_cluster:EksCluster"))
        spec, tags = args.spec, dict(args.tags)
        child = pulumi.ResourceOptions(parent=self)

        key = aws.kms.Key(
            f"{name}-secrets-key",
            description=f"EKS secrets encryption for {args.cluster_name}",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            tags=tags,
            opts=child,
        )
        # Created before the cluster so EKS writes into a group with our retention, not an unbounded one.
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-logs",
            name=eks.log_group_name(args.cluster_name),
            retention_in_days=spec.log_retention_days,
            tags=tags,
            opts=child,
        )
        role = _role(
            f"{name}-role", iam.service_trust("eks.amazonaws.com"), iam.CLUSTER_POLICIES, tags, self, args.partition
        )
        endpoint = spec.endpoint
        self.cluster = aws.eks.Cluster(
            f"{name}-cluster",
            name=args.cluster_name,
            version=spec.kubernetes_version,
            role_arn=role.arn,
            vpc_config=aws.eks.ClusterVpcConfigArgs(
                subnet_ids=list(args.subnet_ids),
                endpoint_private_access=True,
                endpoint_public_access=endpoint.access != "private",
                public_access_cidrs=endpoint.public_access_cidrs if endpoint.access == "restricted" else None,
            ),
            encryption_config=aws.eks.ClusterEncryptionConfigArgs(
                provider=aws.eks.ClusterEncryptionConfigProviderArgs(key_arn=key.arn), resources=["secrets"]
            ),
            enabled_cluster_log_types=list(eks.CONTROL_PLANE_LOGS),
            access_config=aws.eks.ClusterAccessConfigArgs(
                authentication_mode="API",
                # The identity running `pulumi up` must reach the API to install charts and model servers.
                bootstrap_cluster_creator_admin_permissions=True,
            ),
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[log_group]),
        )
        for i, arn in enumerate(spec.admin_role_arns):
            entry = aws.eks.AccessEntry(
                f"{name}-admin-{i}",
                cluster_name=self.cluster.name,
                principal_arn=arn,
                type="STANDARD",
                tags=tags,
                opts=child,
            )
            aws.eks.AccessPolicyAssociation(
                f"{name}-admin-{i}-policy",
                cluster_name=self.cluster.name,
                principal_arn=arn,
                policy_arn=eks.cluster_admin_policy_arn(args.partition),
                access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[entry]),
            )
        # EKS creates the nodes' access entries itself for managed node groups.
        self.node_role = _role(
            f"{name}-node-role", iam.service_trust("ec2.amazonaws.com"), iam.NODE_POLICIES, tags, self, args.partition
        )
        self.bootstrap_addons = [
            aws.eks.Addon(
                f"{name}-{addon}",
                cluster_name=self.cluster.name,
                addon_name=addon,
                configuration_values=json.dumps(eks.ADDON_CONFIGURATION[addon])
                if addon in eks.ADDON_CONFIGURATION
                else None,
                resolve_conflicts_on_create="OVERWRITE",
                resolve_conflicts_on_update="OVERWRITE",
                tags=tags,
                opts=child,
            )
            for addon in eks.BOOTSTRAP_ADDONS
        ]
        self.name = self.cluster.name
        kubeconfig: pulumi.Output[str] = pulumi.Output.all(
            self.cluster.name,
            self.cluster.endpoint,
            self.cluster.certificate_authority.data,
        ).apply(lambda v: json.dumps(eks.kubeconfig(v[0], v[1], v[2], args.region)))
        self.kubeconfig: pulumi.Output[str] = pulumi.Output.secret(kubeconfig)
        self.register_outputs(
            {"clusterName": self.cluster.name, "endpoint": self.cluster.endpoint, "nodeRoleArn": self.node_role.arn}
        )
