"""Cluster-level plans (pure): control plane logs, core add-ons, subnets and the kubeconfig."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

CONTROL_PLANE_LOGS = ("api", "audit", "authenticator", "controllerManager", "scheduler")
# Core add-ons, managed by EKS (EKS picks the default version for the cluster version).
BOOTSTRAP_ADDONS = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")  # before any node joins
# The VPC CNI's network policy agent enforces NetworkPolicies (the model servers accept the gateway only); the
# value is a string in the add-on's configuration schema.
ADDON_CONFIGURATION = {"vpc-cni": {"enableNetworkPolicy": "true"}}
NODE_ADDONS = ("coredns",)  # needs nodes to run on: created after the node pools
CORE_ADDONS = BOOTSTRAP_ADDONS + NODE_ADDONS


def cluster_admin_policy_arn(partition: str) -> str:
    """EKS's access policy: its account is spelled `aws` in every partition, the partition is the region's."""
    return f"arn:{partition}:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"


def log_group_name(cluster_name: str) -> str:
    """EKS writes control plane logs to exactly this group; creating it first sets its retention."""
    return f"/aws/eks/{cluster_name}/cluster"


@dataclass(frozen=True)
class SubnetPlan:
    az: str
    public_cidr: str  # NAT gateway and load balancers only; no instance gets a public IP
    private_cidr: str  # nodes and pods


def subnet_plan(vpc_cidr: str, azs: list[str]) -> list[SubnetPlan]:
    """Split the VPC: a small public /24-sized slice per AZ and a large private slice per AZ."""
    network = ipaddress.IPv4Network(vpc_cidr)
    halves = list(network.subnets(prefixlen_diff=1))  # [private half, public half]
    private = list(halves[0].subnets(prefixlen_diff=2))  # up to 4 AZs
    public = list(halves[1].subnets(prefixlen_diff=4))
    if len(azs) > len(private):
        raise ValueError(f"at most {len(private)} AZs fit in {vpc_cidr}")
    return [SubnetPlan(az, str(public[i]), str(private[i])) for i, az in enumerate(azs)]


def kubeconfig(cluster_name: str, endpoint: str, ca_data: str, region: str) -> dict[str, Any]:
    """A kubeconfig that gets tokens from `aws eks get-token` (the AWS CLI on the deploying machine)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
        "current-context": cluster_name,
        "users": [
            {
                "name": cluster_name,
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "aws",
                        "args": [
                            "eks",
                            "get-token",
                            "--cluster-name",
                            cluster_name,
                            "--region",
                            region,
                            "--output",
                            "json",
                        ],
                    }
                },
            }
        ],
    }
