"""IAM documents of the serving cluster (pure): trust policies and the cluster autoscaler's policy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Managed policies, by what needs them.
CLUSTER_POLICIES = ("AmazonEKSClusterPolicy",)
NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryReadOnly", "AmazonEKS_CNI_Policy")


def managed_policy_arn(name: str, partition: str = "aws") -> str:
    return f"arn:{partition}:iam::aws:policy/{name}"


def service_trust(service: str) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
    }


@dataclass(frozen=True)
class PodScope:
    """The one cluster, namespace and service account a Pod Identity role is for."""

    cluster_name: str
    namespace: str
    service_account: str


def pod_identity_trust(scope: PodScope | None = None) -> dict[str, Any]:
    """Trust of roles handed to pods through EKS Pod Identity. With `scope`, only sessions whose Pod Identity
    session tags name that cluster, namespace and service account (the EKS user guide's "Create IAM role with
    trust policy required by EKS Pod Identity"): another association in the account, on another cluster or
    for another service account, cannot obtain the role. Without it (an association with session tags
    disabled, which then carries none) the association alone decides."""
    statement: dict[str, Any] = {
        "Effect": "Allow",
        "Principal": {"Service": "pods.eks.amazonaws.com"},
        "Action": ["sts:AssumeRole", "sts:TagSession"],
    }
    if scope:
        statement["Condition"] = {
            "StringEquals": {
                "aws:RequestTag/eks-cluster-name": scope.cluster_name,
                "aws:RequestTag/kubernetes-namespace": scope.namespace,
                "aws:RequestTag/kubernetes-service-account": scope.service_account,
            }
        }
    return {"Version": "2012-10-17", "Statement": [statement]}


def cluster_autoscaler_policy(cluster_name: str) -> dict[str, Any]:
    """Describe everything; change only Auto Scaling groups tagged as owned by this cluster."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "Describe",
                "Effect": "Allow",
                "Resource": "*",
                "Action": [
                    "autoscaling:DescribeAutoScalingGroups",
                    "autoscaling:DescribeAutoScalingInstances",
                    "autoscaling:DescribeLaunchConfigurations",
                    "autoscaling:DescribeScalingActivities",
                    "autoscaling:DescribeTags",
                    "ec2:DescribeImages",
                    "ec2:DescribeInstanceTypes",
                    "ec2:DescribeLaunchTemplateVersions",
                    "ec2:GetInstanceTypesFromInstanceRequirements",
                    "eks:DescribeNodegroup",
                ],
            },
            {
                "Sid": "ScaleOwnGroups",
                "Effect": "Allow",
                "Resource": "*",
                "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
                "Condition": {"StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "owned"}},
            },
        ],
    }
