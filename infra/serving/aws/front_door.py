"""What EKS adds to the front door (pure): the Network Load Balancer in front of the gateway's proxies, made by
the AWS Load Balancer Controller, terminating TLS with the stack's ACM certificate.

Facts (kubernetes-sigs/aws-load-balancer-controller v3.5.0: docs/guide/service/annotations.md, the chart's
values.yaml, docs/install/iam_policy.json): a Service of class service.k8s.aws/nlb is the controller's; each
Service port is one listener, so with 443 alone port 80 has no listener at all; spec.loadBalancerSourceRanges
become the rules of the security group the controller makes for the load balancer (0.0.0.0/0 when empty).
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any

from infra.core.naming import first_group
from infra.core.shapes import as_list
from infra.serving.aws.config import SECRET_ARN, AwsGatewaySpec
from infra.serving.charts import Chart
from infra.serving.front_door import LISTENER_PORT

LOAD_BALANCER_CONTROLLER = Chart(
    "aws-load-balancer-controller",
    "aws-load-balancer-controller",
    "3.5.0",
    "https://aws.github.io/eks-charts",
    "kube-system",
)
LOAD_BALANCER_CONTROLLER_ACCOUNT = "aws-load-balancer-controller"
LOAD_BALANCER_CLASS = "service.k8s.aws/nlb"
# TLS 1.3 and 1.2 only (the controller's own default, ELBSecurityPolicy-2016-08, still accepts TLS 1.0).
TLS_POLICY = "ELBSecurityPolicy-TLS13-1-2-2021-06"
_ANNOTATION = "service.beta.kubernetes.io/aws-load-balancer-"


def envoy_service(gateway: AwsGatewaySpec) -> dict[str, Any]:
    """The proxies' Service as Envoy Gateway creates it (EnvoyProxy envoyService): an internet-facing NLB with
    the pods as IP targets, TLS ended on 443 with the certificate and forwarded as TCP to the listener."""
    service: dict[str, Any] = {
        "type": "LoadBalancer",
        "loadBalancerClass": LOAD_BALANCER_CLASS,
        "externalTrafficPolicy": "Cluster",
        "annotations": {
            f"{_ANNOTATION}scheme": "internet-facing",
            f"{_ANNOTATION}nlb-target-type": "ip",
            f"{_ANNOTATION}ssl-cert": gateway.certificate_arn,
            f"{_ANNOTATION}ssl-ports": str(LISTENER_PORT),
            f"{_ANNOTATION}ssl-negotiation-policy": TLS_POLICY,
            f"{_ANNOTATION}backend-protocol": "tcp",
            f"{_ANNOTATION}cross-zone-load-balancing-enabled": "true",
            # IP targets do not keep the caller's address unless asked: without it every request reaches Envoy from
            # the load balancer's own addresses, and per-address limits (auth none) would count the NLB, not callers.
            f"{_ANNOTATION}target-group-attributes": "preserve_client_ip.enabled=true",
        },
    }
    if gateway.source_cidrs:
        service["loadBalancerSourceRanges"] = list(gateway.source_cidrs)
    return service


def load_balancer_controller_values(
    cluster_name: str, region: str, vpc_id: Any, system_pool: dict[str, str]
) -> dict[str, Any]:
    """`vpc_id` may be an Output (the stack's VPC): the controller then needs no instance metadata to find it."""
    return {
        "clusterName": cluster_name,
        "region": region,
        "vpcId": vpc_id,
        "serviceAccount": {"create": True, "name": LOAD_BALANCER_CONTROLLER_ACCOUNT},
        "replicaCount": 2,
        "nodeSelector": system_pool,
        # Only Services that ask for the controller (by class) get a load balancer of it; no webhook rewrites
        # every LoadBalancer Service of the cluster.
        "enableServiceMutatorWebhook": False,
        "defaultTargetType": "ip",
        "enableShield": False,
        "enableWaf": False,
        "enableWafv2": False,
        "keepTLSSecret": True,  # the webhook's certificate is not regenerated (and its pods restarted) on every up
    }


@cache
def _policy_file() -> dict[str, Any]:
    text = (files("infra.catalog") / "data" / "aws_load_balancer_controller_policy.json").read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def published_policy() -> dict[str, Any]:
    """The controller's IAM policy for its pinned release, as it publishes it."""
    policy: dict[str, Any] = _policy_file()["policy"]
    return policy


# Web ACLs and Shield protections are for Application Load Balancers; the controller is told not to manage them
# (enableWaf, enableWafv2, enableShield false), so their writes are not granted.
_NOT_USED = (
    "waf-regional:AssociateWebACL",
    "waf-regional:DisassociateWebACL",
    "wafv2:AssociateWebACL",
    "wafv2:DisassociateWebACL",
    "shield:CreateProtection",
    "shield:DeleteProtection",
)
# The tags the controller writes on what it creates (elbv2.k8s.aws/cluster, service.k8s.aws/stack, ...; v3.5.0's
# pkg/deploy/tracking). Its chart's defaultTags, or a Service's additional-resource-tags annotation, would add keys
# the tagging grant refuses: set neither without adding their keys here (a test holds the values to that).
CONTROLLER_TAGS = ("elbv2.k8s.aws/*", "service.k8s.aws/*")


def load_balancer_controller_policy(region: str, account_id: str, partition: str, vpc_id: str) -> dict[str, Any]:
    """The published policy narrowed to this stack: security group writes to its VPC, listener writes to the
    load balancers the controller names (k8s-...), tag writes to the controller's own keys, ALB-only features out.
    Nothing the controller does for a Network Load Balancer in this VPC is taken away."""
    elb = f"arn:{partition}:elasticloadbalancing:{region}:{account_id}"
    ec2 = f"arn:{partition}:ec2:{region}:{account_id}"
    in_vpc = {"ArnEquals": {"ec2:Vpc": f"{ec2}:vpc/{vpc_id}"}}
    statements = []
    for statement in published_policy()["Statement"]:
        st = dict(statement)
        actions = [a for a in as_list(st["Action"]) if a not in _NOT_USED]
        if not actions:
            continue
        st["Action"] = actions
        condition = st.get("Condition")
        if st.get("Resource") == "*" and not condition:
            if actions == ["ec2:CreateSecurityGroup"]:
                # Its resources are the new group and the VPC it is made in: naming the VPC is the narrowing
                # (ec2:Vpc is a key of security groups, not of the VPC resource, so a condition would refuse it).
                st["Resource"] = [f"{ec2}:security-group/*", f"{ec2}:vpc/{vpc_id}"]
            elif all(a.startswith("ec2:") for a in actions) and any(not a.startswith("ec2:Describe") for a in actions):
                st["Condition"] = in_vpc
            elif all(a.startswith("elasticloadbalancing:") for a in actions):
                st["Resource"] = [
                    f"{elb}:loadbalancer/net/k8s-*/*",
                    f"{elb}:listener/net/k8s-*/*/*",
                    f"{elb}:listener-rule/net/k8s-*/*/*/*",
                ]
        if any(a in ("ec2:CreateTags", "ec2:DeleteTags") for a in actions):
            st["Condition"] = {**(condition or {}), "ForAllValues:StringLike": {"aws:TagKeys": list(CONTROLLER_TAGS)}}
        statements.append(st)
    return {"Version": published_policy()["Version"], "Statement": statements}


def secret_region(secret_arn: str) -> str:
    return first_group(SECRET_ARN, secret_arn)


def secret_store_provider(secret_arn: str) -> dict[str, Any]:
    """External Secrets' Secrets Manager provider in the secret's region, with the controller's own (Pod Identity)
    credentials: no `auth` block, so no access key is kept anywhere."""
    return {"aws": {"service": "SecretsManager", "region": secret_region(secret_arn)}}


def api_keys_reader_policy(secret_arn: str) -> dict[str, Any]:
    """Read the one secret. Encrypted with Secrets Manager's own key it needs nothing more; a secret under a
    customer managed key also needs the key's policy to allow this role kms:Decrypt (granted there, by name)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                "Resource": secret_arn,
            }
        ],
    }
