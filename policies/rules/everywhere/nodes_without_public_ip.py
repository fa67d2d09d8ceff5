"""Nodes get no public IP: the subnets that training nodes and serving node groups launch into do not map
public IPs on launch, and no single-interface launch template, instance or Karpenter EC2NodeClass asks
for one. Nodes reach the internet through a NAT gateway or VPC endpoints. (Multi-interface templates
are multi-interface-instances-without-public-ip's: EC2 refuses those outright.) Subnets no node
launches into (a NAT gateway's) are not this rule's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.providers import tokens
from policies.model import Finding, Resource, Stack, StackRule
from policies.readers.aws import (
    AUTOSCALING_GROUP,
    EKS_NODE_GROUP,
    FLEET,
    INSTANCE,
    LAUNCH_TEMPLATE,
    SUBNET,
    interfaces,
    linked_of_type,
    listed,
)

NAME = "nodes-without-public-ip"
EC2_NODE_CLASS = tokens.K8S_KARPENTER_EC2_NODE_CLASS
NODE_TYPES = (EKS_NODE_GROUP, AUTOSCALING_GROUP, FLEET, INSTANCE, LAUNCH_TEMPLATE)
# Where each launcher names its subnets (the engine links them through these properties).
_SUBNET_PROPS = ("subnetIds", "vpcZoneIdentifiers", "subnetId", "networkInterfaces", "launchTemplateConfigs")
_FIX = "nodes reach the internet through the NAT gateway or VPC endpoints"


def _public(value: Any) -> bool:
    return value is True or value == "true"


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    launchers: dict[str, list[str]] = {}
    subnets: dict[str, Resource] = {}
    for node in stack.of_type(*NODE_TYPES):
        for subnet in linked_of_type(stack, node, _SUBNET_PROPS, SUBNET):
            subnets.setdefault(subnet.urn, subnet)
            launchers.setdefault(subnet.urn, []).append(node.label)
    findings = [
        Finding(
            urn,
            f"subnet {subnet.label} maps a public IP to every instance launched in it "
            f"(mapPublicIpOnLaunch true), and {listed(launchers[urn])} launch there; set mapPublicIpOnLaunch "
            f"false ({_FIX})",
        )
        for urn, subnet in subnets.items()
        if _public(subnet.get("mapPublicIpOnLaunch"))
    ]
    for template in stack.of_type(LAUNCH_TEMPLATE):
        declared = interfaces(template)
        if len(declared) < 2:
            findings.extend(
                Finding(
                    template.urn,
                    (f"{template.label} networkInterfaces[{i}] sets associatePublicIpAddress; remove it ({_FIX})"),
                )
                for i, ni in enumerate(declared)
                if _public(ni.get("associatePublicIpAddress"))
            )
    for instance in stack.of_type(INSTANCE):
        if _public(instance.get("associatePublicIpAddress")):
            findings.append(
                Finding(
                    instance.urn,
                    (
                        f"{instance.label} sets associatePublicIpAddress; remove it and launch into a subnet "
                        f"that maps no "
                        f"public IPs ({_FIX})"
                    ),
                )
            )
    for node_class in stack.of_type(EC2_NODE_CLASS):
        spec = node_class.get("spec")
        if isinstance(spec, dict) and _public(spec.get("associatePublicIPAddress")):
            findings.append(
                Finding(
                    node_class.urn,
                    (
                        f"Karpenter EC2NodeClass {node_class.label} sets spec.associatePublicIPAddress; set it "
                        f"false ({_FIX})"
                    ),
                )
            )
    return findings


RULE = StackRule(
    NAME, "Node subnets map no public IPs, and no node template or instance asks for one.", "mandatory", check
)
