"""Valid variants of the demo stacks' previews that rules must let pass: the exceptions and scoped forms a
reviewer's rule could wrongly catch (each must give no finding of any rule)."""

from __future__ import annotations

import json

from infra.providers import tokens as t
from infra.tools.preview_json import PolicyResource
from tests.policies.corpus.mutations import (
    DELETE,
    Entry,
    Resources,
    add,
    both,
    copy_as,
    drop,
    find,
    set_,
    with_statement,
)

R = "run-demo-llama-7b-001-"
G = "run-demo-llama-7b-gcp-001-"
GUARD_POLICY = (t.AWS_IAM_ROLE_POLICY, f"{R}guard-permissions")


def _device_plugin(resources: Resources) -> PolicyResource:
    server = find(resources, t.K8S_DEPLOYMENT, "model-mistral-7b-deployment")
    sockets = "/var/lib/kubelet/device-plugins"
    spec = {
        "selector": {"matchLabels": {"name": "nvidia-device-plugin-ds"}},
        "template": {
            "metadata": {"labels": {"name": "nvidia-device-plugin-ds"}},
            "spec": {
                "containers": [
                    {
                        "name": "nvidia-device-plugin-ctr",
                        "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.1",
                        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": [{"name": "device-plugin", "mountPath": sockets}],
                    }
                ],
                "volumes": [{"name": "device-plugin", "hostPath": {"path": sockets}}],
            },
        },
    }
    props = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "kube-system"},
        "spec": spec,
    }
    urn = server.urn.replace(t.K8S_DEPLOYMENT, t.K8S_DAEMON_SET).rsplit("::", 1)[0] + "::device-plugin"
    return PolicyResource(
        urn, t.K8S_DAEMON_SET, "device-plugin", True, props, parent=server.parent, provider=server.provider
    )


def _scoped_project_policy(resources: Resources) -> PolicyResource:
    member = find(resources, t.GCP_PROJECTS_IAM_MEMBER, f"{G}logging-logwriter")
    bindings = [{"role": "roles/logging.logWriter", "members": [member.props["member"]]}]
    urn = member.urn.replace(t.GCP_PROJECTS_IAM_MEMBER, t.GCP_PROJECTS_IAM_POLICY).rsplit("::", 1)[0] + "::policy"
    return PolicyResource(
        urn,
        t.GCP_PROJECTS_IAM_POLICY,
        "policy",
        True,
        {"project": member.props["project"], "policyData": json.dumps({"bindings": bindings})},
        parent=member.parent,
        provider=member.provider,
    )


def _private(name: str, cidr: str):
    rule = t.AWS_VPC_SECURITY_GROUP_INGRESS_RULE
    return both(
        copy_as(rule, f"{R}nodes-in-lustre-988", name, "cidrIpv4", cidr),
        set_(rule, name, "referencedSecurityGroupId", DELETE),
    )


def _allow(action: object, resource: object, condition: dict | None = None) -> dict:
    statement = {"Sid": "Valid", "Effect": "Allow", "Action": action, "Resource": resource}
    return {**statement, "Condition": condition} if condition else statement


_NLB = "service.beta.kubernetes.io/aws-load-balancer-"
_PROXY_SERVICE = "spec.provider.kubernetes.envoyService"

VALID_MUTATIONS = [
    Entry(
        "gateway-unauthenticated-named-networks",
        "serving-demo",
        "",
        both(
            drop(t.K8S_ENVOY_SECURITY_POLICY, "front-door-securitypolicy"),
            set_(
                t.K8S_ENVOY_PROXY,
                "front-door-envoyproxy",
                f"{_PROXY_SERVICE}.loadBalancerSourceRanges",
                ["198.51.100.0/24"],
            ),
        ),
        "no API keys, but only a named network reaches the load balancer (auth: none with sourceCidrs)",
    ),
    Entry(
        "gateway-unauthenticated-internal",
        "serving-demo",
        "",
        both(
            drop(t.K8S_ENVOY_SECURITY_POLICY, "front-door-securitypolicy"),
            set_(
                t.K8S_ENVOY_PROXY,
                "front-door-envoyproxy",
                f"{_PROXY_SERVICE}.annotations",
                {
                    _NLB + "scheme": "internal",
                    _NLB
                    + "ssl-cert": "arn:aws:acm:us-east-1:123456789012:certificate/0f3c2a9e-5b7d-4e21-9c8a-1d2e3f4a5b6c",
                    _NLB + "ssl-ports": "443",
                },
            ),
        ),
        "no API keys on an internal load balancer, TLS still ended on 443",
    ),
    Entry(
        "device-plugin-socket-dir",
        "serving-demo",
        "",
        add(_device_plugin),
        "the NVIDIA device plugin DaemonSet mounts the kubelet's socket directory, as it must",
    ),
    Entry(
        "tags-at-creation-only",
        "training-demo",
        "",
        set_(
            *GUARD_POLICY,
            "policy",
            with_statement(
                _allow("ec2:CreateTags", "*", {"StringEquals": {"ec2:CreateAction": ["RunInstances", "CreateFleet"]}})
            ),
        ),
        "tagging limited to resources being created",
    ),
    Entry(
        "tags-own-run-only",
        "training-demo",
        "",
        set_(
            *GUARD_POLICY,
            "policy",
            with_statement(
                _allow(
                    "ec2:CreateTags",
                    "arn:aws:ec2:us-east-1:123456789012:instance/*",
                    {"StringEquals": {"aws:ResourceTag/mlinfra:run-id": "demo-llama-7b-001"}},
                )
            ),
        ),
        "retagging only this run's own instances",
    ),
    Entry(
        "passrole-named",
        "training-demo",
        "",
        set_(
            *GUARD_POLICY,
            "policy",
            with_statement(_allow("iam:PassRole", "arn:aws:iam::123456789012:role/run-demo-llama-7b-001-role")),
        ),
        "passing one named role",
    ),
    Entry(
        "permission-by-literal-arns",
        "training-demo",
        "",
        set_(
            t.AWS_LAMBDA_PERMISSION,
            f"{R}guard-from-completion",
            "sourceArn",
            "arn:aws:events:us-east-1:123456789012:rule/run-demo-llama-7b-001-guard-completion-374ff8b",
        ),
        "the permission names its rule by ARN (the dependency stays)",
    ),
    Entry(
        "gcp-scoped-project-policy",
        "training-gcp-demo",
        "",
        add(_scoped_project_policy),
        "a whole project policy that grants only a log writer",
    ),
    Entry(
        "ingress-from-vpc-halves",
        "training-demo",
        "",
        both(*(_private(name, cidr) for name, cidr in (("vpc-half-a", "10.0.0.0/9"), ("vpc-half-b", "10.128.0.0/9")))),
        "two rules admitting halves of 10.0.0.0/8: private, not the internet",
    ),
]
