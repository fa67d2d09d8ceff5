"""Reading pulumi-aws v7 inputs as rules need them: tags and roles, IAM documents, security group
rules, instance types (pure). Property names are the provider's wire names (camelCase)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from infra.core import shapes
from infra.core import tags as contract
from infra.core.network import covers_internet, public_addresses
from infra.core.shapes import dict_at
from infra.providers import tokens
from policies.model import Resource, Stack, is_unknown

S3_BUCKET = tokens.AWS_S3_BUCKET
KMS_KEY = tokens.AWS_KMS_KEY
LAUNCH_TEMPLATE = tokens.AWS_EC2_LAUNCH_TEMPLATE
INSTANCE = tokens.AWS_EC2_INSTANCE
FLEET = tokens.AWS_EC2_FLEET
PLACEMENT_GROUP = tokens.AWS_EC2_PLACEMENT_GROUP
SECURITY_GROUP = tokens.AWS_EC2_SECURITY_GROUP
SECURITY_GROUP_RULE = tokens.AWS_EC2_SECURITY_GROUP_RULE
INGRESS_RULE = tokens.AWS_VPC_SECURITY_GROUP_INGRESS_RULE
EGRESS_RULE = tokens.AWS_VPC_SECURITY_GROUP_EGRESS_RULE
SUBNET = tokens.AWS_EC2_SUBNET
LUSTRE = tokens.AWS_FSX_LUSTRE_FILE_SYSTEM
DRA = tokens.AWS_FSX_DATA_REPOSITORY_ASSOCIATION
EKS_NODE_GROUP = tokens.AWS_EKS_NODE_GROUP
EKS_CLUSTER = tokens.AWS_EKS_CLUSTER
AUTOSCALING_GROUP = tokens.AWS_AUTOSCALING_GROUP
IAM_ROLE = tokens.AWS_IAM_ROLE
IAM_ROLE_POLICY = tokens.AWS_IAM_ROLE_POLICY
IAM_POLICY = tokens.AWS_IAM_POLICY
IAM_ROLE_POLICY_ATTACHMENT = tokens.AWS_IAM_ROLE_POLICY_ATTACHMENT
BUCKET_POLICY = tokens.AWS_S3_BUCKET_POLICY
KARPENTER_NODE_POOL = tokens.K8S_KARPENTER_NODE_POOL

ROLE_TAG = contract.ROLE
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


def tags(resource: Resource) -> dict[str, Any]:
    value = resource.get("tags")
    return dict(value) if isinstance(value, dict) else {}


def role_of(resource: Resource) -> str | None:
    """The `mlinfra:role` tag (registry | training | serving), or None."""
    role = tags(resource).get(ROLE_TAG)
    return role if isinstance(role, str) else None


def stack_role(stack: Stack) -> str | None:
    """The stack kind read from its resources' role tags: the one role they carry, else None."""
    role: str | None = stack.derived("stack_role", _stack_role)
    return role


def _stack_role(stack: Stack) -> str | None:
    roles = {role_of(r) for r in stack.resources} - {None}
    return roles.pop() if len(roles) == 1 else None


def role_in_stack(resource: Resource, stack: Stack) -> str | None:
    """A resource's role: its own tag, else its parent chain's, else the stack's."""
    seen = set()
    current: Resource | None = resource
    while current is not None and current.urn not in seen:
        seen.add(current.urn)
        role = role_of(current)
        if role:
            return role
        current = stack.get(current.parent) if current.parent else None
    return stack_role(stack)


def run_tag(stack: Stack, key: str) -> str | None:
    """The one value a training stack's resources carry for tag `key` (run id, expires-at); None when none
    or several (training-resources-carry-run-tags reports those)."""
    value: str | None = stack.derived(f"run_tag {key}", lambda stack: _run_tag(stack, key))
    return value


def _run_tag(stack: Stack, key: str) -> str | None:
    values = {v for v in (tags(r).get(key) for r in stack.resources if role_of(r) == "training") if isinstance(v, str)}
    return values.pop() if len(values) == 1 else None


def as_list(value: Any) -> list[Any]:
    """`infra.core.shapes.as_list`, with a value the preview does not know yet read as none."""
    return [] if is_unknown(value) else shapes.as_list(value)


# --- IAM -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    effect: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    sid: str
    raw: dict


def policy_document(value: Any) -> dict | None:
    """A policy document from a JSON string or an object; None when unknown or not a document."""
    if is_unknown(value) or value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def statements(document: dict | None) -> list[Statement]:
    if not document:
        return []
    found = []
    for i, raw in enumerate(as_list(document.get("Statement"))):
        if not isinstance(raw, dict):
            continue
        found.append(
            Statement(
                effect=str(raw.get("Effect", "")),
                actions=tuple(str(a) for a in as_list(raw.get("Action"))),
                resources=tuple(str(r) for r in as_list(raw.get("Resource"))),
                sid=str(raw.get("Sid") or f"#{i}"),
                raw=raw,
            )
        )
    return found


# Condition keys that pin who may use a grant to one account, organisation, role, service resource or network.
NARROWING_CONDITION_KEYS = frozenset(
    k.lower()
    for k in (
        "aws:PrincipalAccount",
        "aws:PrincipalOrgID",
        "aws:PrincipalArn",
        "aws:SourceAccount",
        "aws:SourceArn",
        "aws:SourceOwner",
        "aws:SourceVpc",
        "aws:SourceVpce",
        "kms:CallerAccount",
    )
)


def open_to_anyone(st: Statement) -> bool:
    """An Allow whose principal is everyone (`*`, {"AWS": "*"}) with no condition that narrows it to an account,
    an organisation, a role or a network."""
    if st.effect != "Allow":
        return False
    principal = st.raw.get("Principal")
    values = [principal] if isinstance(principal, str) else []
    if isinstance(principal, dict):
        values = [v for value in principal.values() for v in as_list(value)]
    if "*" not in values and "NotPrincipal" not in st.raw:
        return False
    condition = st.raw.get("Condition")
    keys = (
        {str(k).lower() for test in condition.values() if isinstance(test, dict) for k in test}
        if isinstance(condition, dict)
        else set()
    )
    return not keys & NARROWING_CONDITION_KEYS


def iam_documents(resource: Resource) -> list[tuple[str, dict | None]]:
    """(where, document) for every IAM document a resource declares."""
    if resource.type in (IAM_ROLE_POLICY, IAM_POLICY, BUCKET_POLICY):
        return [("policy", policy_document(resource.get("policy")))]
    if resource.type == IAM_ROLE:
        return [
            (f"inlinePolicies[{i}]", policy_document(p.get("policy") if isinstance(p, dict) else None))
            for i, p in enumerate(as_list(resource.get("inlinePolicies")))
        ]
    return []


def covers(pattern: str, action: str) -> bool:
    """Whether an IAM action pattern (`*`, `?` wildcards, any case) matches `action`."""
    regex = ".*".join(re.escape(part) for part in pattern.split("*")).replace(r"\?", ".")
    return re.fullmatch(regex, action, re.IGNORECASE) is not None


def granted(st: Statement, action: str) -> str | None:
    """How an Allow statement grants `action`: the pattern in Action that covers it, 'NotAction' when the
    statement's NotAction leaves it out, None when the statement does not grant it."""
    if st.effect != "Allow":
        return None
    if "NotAction" in st.raw:
        excluded = [str(a) for a in as_list(st.raw.get("NotAction"))]
        return None if any(covers(p, action) for p in excluded) else "NotAction"
    return next((p for p in st.actions if covers(p, action)), None)


def condition_keys(st: Statement) -> set[str]:
    """The condition keys of a statement, lower-cased, whatever their operators."""
    condition = st.raw.get("Condition")
    if not isinstance(condition, dict):
        return set()
    return {str(k).lower() for test in condition.values() if isinstance(test, dict) for k in test}


def service_of(action: str) -> str:
    return action.split(":", 1)[0].lower() if ":" in action else action


# --- security groups ---------------------------------------------------------------------------------


def s3_writes(action: str) -> bool:
    """An action that changes S3 (anything but Get*/List*), `*` and `s3:*` included."""
    if action == "*":
        return True
    if service_of(action) != "s3":
        return False
    verb = action.lower().split(":", 1)[1]
    return verb == "*" or not verb.startswith(("get", "list"))


def s3_object_key(arn: str) -> str:
    """'models/*' of 'arn:aws:s3:::bucket/models/*'; '' for anything that is not an S3 object ARN."""
    _, _, path = arn.partition(":::")
    return path.partition("/")[2] if arn.startswith("arn:") and ":s3:::" in arn else ""


def is_anywhere(cidr: Any) -> bool:
    """One CIDR that admits the internet at large (infra.core.network.covers_internet): 0.0.0.0/0, ::/0, or any range
    holding more than a /8's worth of public addresses, such as 0.0.0.0/1."""
    return isinstance(cidr, str) and covers_internet([cidr])


def split_internet(cidrs: list[Any]) -> list[str]:
    """The CIDRs of `cidrs` when together they admit the internet at large but none does alone (0.0.0.0/1 and
    128.0.0.0/1, or the internet less the private ranges in pieces): split to pass a per-CIDR check. [] otherwise."""
    kept = [c for c in cidrs if isinstance(c, str)]
    if not covers_internet(kept) or any(is_anywhere(c) for c in kept):
        return []
    return [c for c in kept if public_addresses([c], 4) or public_addresses([c], 6)]


@dataclass(frozen=True)
class SgRule:
    """One security group rule, whichever resource declares it."""

    direction: str  # "ingress" | "egress"
    protocol: str  # "-1" (all), "tcp", "udp", "icmp", ... or a number
    from_port: Any
    to_port: Any
    self_ref: bool  # the peer is the group itself
    cidrs: tuple[str, ...]
    where: str

    @property
    def all_traffic(self) -> bool:
        return self.protocol in ("-1", "all")

    def allows_tcp(self, port: int) -> bool:
        if self.all_traffic:
            return True
        if self.protocol not in ("tcp", "6"):
            return False
        try:
            return int(self.from_port) <= port <= int(self.to_port)
        except (TypeError, ValueError):
            return False


def group_rules(group: Resource, stack: Stack) -> list[SgRule]:
    """Every rule of a security group: inline ingress/egress blocks and the separate rule resources
    whose securityGroupId depends on it."""
    rules: list[SgRule] = []
    for direction in ("ingress", "egress"):
        for i, block in enumerate(as_list(group.get(direction))):
            if not isinstance(block, dict):
                continue
            # Inline blocks name their own group with `self = true` (its id does not exist yet).
            rules.append(
                SgRule(
                    direction=direction,
                    protocol=str(block.get("protocol", "")).lower(),
                    from_port=block.get("fromPort"),
                    to_port=block.get("toPort"),
                    self_ref=block.get("self") is True,
                    cidrs=tuple(as_list(block.get("cidrBlocks")) + as_list(block.get("ipv6CidrBlocks"))),
                    where=f"{group.label} {direction}[{i}]",
                )
            )
    for rule in stack.referring(group, "securityGroupId", INGRESS_RULE, EGRESS_RULE):
        direction = "ingress" if rule.type == INGRESS_RULE else "egress"
        peer = [r.urn for r in stack.linked(rule, "referencedSecurityGroupId")]
        rules.append(
            SgRule(
                direction=direction,
                protocol=str(rule.get("ipProtocol", "")).lower(),
                from_port=rule.get("fromPort"),
                to_port=rule.get("toPort"),
                self_ref=group.urn in peer,
                cidrs=tuple(c for c in (rule.get("cidrIpv4"), rule.get("cidrIpv6")) if isinstance(c, str)),
                where=rule.label,
            )
        )
    for rule in stack.referring(group, "securityGroupId", SECURITY_GROUP_RULE):
        peer = [r.urn for r in stack.linked(rule, "sourceSecurityGroupId")]
        rules.append(
            SgRule(
                direction=str(rule.get("type", "")),
                protocol=str(rule.get("protocol", "")).lower(),
                from_port=rule.get("fromPort"),
                to_port=rule.get("toPort"),
                self_ref=rule.get("self") is True or group.urn in peer,
                cidrs=tuple(as_list(rule.get("cidrBlocks")) + as_list(rule.get("ipv6CidrBlocks"))),
                where=rule.label,
            )
        )
    return rules


# --- instances ---------------------------------------------------------------------------------------


def instance_types(resource: Resource, stack: Stack | None = None) -> list[str]:
    """Instance types a resource launches or allows (known values only)."""
    found: list[Any] = []
    if resource.type in (LAUNCH_TEMPLATE, INSTANCE):
        found.append(resource.get("instanceType"))
    elif resource.type == EKS_NODE_GROUP:
        found.extend(as_list(resource.get("instanceTypes")))
    elif resource.type == FLEET:
        for config in as_list(resource.get("launchTemplateConfigs")):
            if isinstance(config, dict):
                found.extend(o.get("instanceType") for o in as_list(config.get("overrides")) if isinstance(o, dict))
        if not [t for t in found if isinstance(t, str)] and stack is not None:
            for template in stack.linked(resource, "launchTemplateConfigs"):
                found.extend(instance_types(template))
    elif resource.type == KARPENTER_NODE_POOL:
        spec = dict_at(resource.get("spec"))
        pod_template = dict_at(spec, "template", "spec")
        for requirement in as_list(pod_template.get("requirements")):
            if (
                isinstance(requirement, dict)
                and requirement.get("key") == INSTANCE_TYPE_LABEL
                and requirement.get("operator") == "In"
            ):
                found.extend(as_list(requirement.get("values")))
    return [t for t in found if isinstance(t, str)]


def names(items: Iterable[Any]) -> str:
    return ", ".join(str(i) for i in items)


def span(numbers: Iterable[int]) -> str:
    """1, 2, 3, 5 -> '1-3, 5'."""
    values = sorted(set(numbers))
    parts: list[str] = []
    start: int | None = None
    prev: int | None = None
    for n in [*values, None]:
        if start is not None and prev is not None and (n is None or n != prev + 1):
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if n is not None and start is None:
            start = n
        prev = n
    return ", ".join(parts)


def number(value: Any) -> Any:
    """Protobuf carries every number as a double: 4.0 -> 4."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def interfaces(template: Resource) -> list[dict]:
    return [ni for ni in as_list(template.get("networkInterfaces")) if isinstance(ni, dict)]


def is_efa_interface(interface: dict) -> bool:
    return interface.get("interfaceType") in ("efa", "efa-only")


def uses_efa(template: Resource) -> bool:
    return any(is_efa_interface(ni) for ni in interfaces(template))


def linked_of_type(stack: Stack, resource: Resource, props: Iterable[str], *types: str) -> list[Resource]:
    found: dict[str, Resource] = {}
    for prop in props:
        for other in stack.linked(resource, prop):
            if other.type in types:
                found.setdefault(other.urn, other)
    return list(found.values())


def template_groups(template: Resource, stack: Stack) -> list[Resource]:
    """Security groups declared in the stack that a launch template's interfaces use."""
    return linked_of_type(stack, template, ("networkInterfaces", "vpcSecurityGroupIds"), SECURITY_GROUP)


def efa_templates(stack: Stack) -> list[Resource]:
    """Launch templates of EFA nodes: any that declares an EFA interface."""
    return [t for t in stack.of_type(LAUNCH_TEMPLATE) if uses_efa(t)]


def node_placements(stack: Stack) -> list[tuple[Resource, str, str]]:
    """(resource, 'subnet' | 'az', value) for every place training nodes are put: launch templates of EFA
    nodes, fleets and instances. Subnets declared in the stack are named by their Pulumi name."""
    found: list[tuple[Resource, str, str]] = []
    nodes = (
        efa_templates(stack) + stack.of_type(FLEET) + [i for i in stack.of_type(INSTANCE) if role_of(i) == "training"]
    )
    for node in nodes:
        subnets = linked_of_type(stack, node, ("networkInterfaces", "launchTemplateConfigs", "subnetId"), SUBNET)
        for subnet in subnets:
            found.append((node, "subnet", subnet.name))
            az = subnet.get("availabilityZone")
            if isinstance(az, str) and not is_unknown(az):
                found.append((node, "az", az))
        literal_subnets = [ni.get("subnetId") for ni in interfaces(node)] + [node.get("subnetId")]
        literal_azs = [
            node.get("availabilityZone"),
            (node.get("placement") or {}).get("availabilityZone") if isinstance(node.get("placement"), dict) else None,
        ]
        for config in as_list(node.get("launchTemplateConfigs")):
            for override in as_list(config.get("overrides") if isinstance(config, dict) else None):
                if isinstance(override, dict):
                    literal_subnets.append(override.get("subnetId"))
                    literal_azs.append(override.get("availabilityZone"))
        if not subnets:
            found.extend((node, "subnet", s) for s in literal_subnets if isinstance(s, str) and not is_unknown(s))
        found.extend((node, "az", a) for a in literal_azs if isinstance(a, str) and not is_unknown(a))
    return found


def attached_to_bucket(stack: Stack, bucket: Resource, *types: str) -> list[Resource]:
    """Bucket sub-resources (versioning, public access block, ...) whose `bucket` input is this bucket:
    by dependency, or by the known bucket name when the document carries no dependencies."""
    by_dependency = stack.referring(bucket, "bucket", *types)
    if by_dependency:
        return by_dependency
    name = bucket.get("bucket")
    if not isinstance(name, str) or is_unknown(name):
        return []
    return [r for r in stack.of_type(*types) if r.get("bucket") == name]


def registry_buckets(stack: Stack) -> list[Resource]:
    return [b for b in stack.of_type(S3_BUCKET) if role_of(b) == "registry"]


def listed(items: list[str], limit: int = 5, sep: str = ", ") -> str:
    """At most `limit` items, then how many more."""
    shown = sep.join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
