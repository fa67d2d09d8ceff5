"""Reading NetworkPolicies by their effect (pure): which pods a policy selects, whether it limits their ingress,
which of its ingress rules admit any pod of the cluster; and whether the stack's cluster enforces them at all
(a NetworkPolicy nothing enforces admits everyone).

Semantics (Kubernetes networking.k8s.io/v1): policies are additive, so a pod selected by several admits what any
of them admits; `policyTypes` defaults to Ingress; an ingress rule without `from` admits every source; a peer
with `namespaceSelector: {}` and no (or an empty) `podSelector` admits every pod of every namespace; a label
selector with an unknown operator matches nothing.
"""

from __future__ import annotations

import json

from infra.core.network import covers_internet
from infra.core.shapes import dict_at
from infra.providers import tokens
from policies.model import Resource, Stack, is_unknown
from policies.readers.aws import as_list
from policies.readers.workloads import metadata, namespace_of, spec

NETWORK_POLICY = tokens.K8S_NETWORK_POLICY


def matches(selector: object, labels: dict) -> bool:
    """A label selector (matchLabels and matchExpressions) against a pod's labels; {} matches every pod."""
    selector = dict_at(selector)
    if any(labels.get(k) != v for k, v in dict_at(selector.get("matchLabels")).items()):
        return False
    for expression in as_list(selector.get("matchExpressions")):
        expression = dict_at(expression)
        key, operator = expression.get("key"), expression.get("operator")
        values = [v for v in as_list(expression.get("values")) if isinstance(v, str)]
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


def selecting(stack: Stack, namespace: str, labels: dict) -> list[Resource]:
    """The NetworkPolicies that limit the ingress of a pod with `labels` in `namespace`."""
    found = []
    for policy in stack.of_type(NETWORK_POLICY):
        body = spec(policy)
        if namespace_of(metadata(policy)) != namespace or not matches(body.get("podSelector"), labels):
            continue
        types = [t for t in as_list(body.get("policyTypes")) if isinstance(t, str)]
        if not types or "Ingress" in types:
            found.append(policy)
    return found


def _peer_admits_any_pod(peer: dict) -> str | None:
    if "ipBlock" in peer:
        cidr = dict_at(peer.get("ipBlock")).get("cidr")
        if isinstance(cidr, str) and not is_unknown(cidr) and covers_internet([cidr]):
            return f"ipBlock {cidr}"
        return None
    if "namespaceSelector" not in peer:
        return None  # pods of the policy's own namespace, by their labels
    pods = peer.get("podSelector")
    if dict_at(peer.get("namespaceSelector")) == {} and (pods is None or dict_at(pods) == {}):
        return "every pod of every namespace (namespaceSelector {})"
    return None


def open_rules(policy: Resource) -> list[str]:
    """What in a policy's ingress rules admits any pod of the cluster, in words; [] when every rule names its
    peers (by labels, or by namespace and labels)."""
    found = []
    for n, rule in enumerate(as_list(spec(policy).get("ingress"))):
        peers = dict_at(rule).get("from")
        if peers is None or as_list(peers) == []:
            found.append(f"ingress[{n}] has no `from`, so every source")
            continue
        for peer in as_list(peers):
            reason = _peer_admits_any_pod(dict_at(peer))
            if reason:
                found.append(f"ingress[{n}] admits {reason}")
    return found


def _addon_enables_policies(addon: Resource) -> bool:
    """The VPC CNI add-on with its network policy agent switched on (configurationValues enableNetworkPolicy)."""
    raw = addon.get("configurationValues")
    if is_unknown(raw):
        return True
    try:
        values = json.loads(raw) if isinstance(raw, str) else {}
    except json.JSONDecodeError:
        return False
    return str(dict_at(values).get("enableNetworkPolicy", "")).lower() == "true"


def _gke_enforces(cluster: Resource) -> bool:
    if cluster.get("datapathProvider") == "ADVANCED_DATAPATH":
        return True
    calico = dict_at(cluster.get("networkPolicy")).get("enabled") is True
    addon = dict_at(dict_at(cluster.get("addonsConfig")).get("networkPolicyConfig"))
    return calico and addon.get("disabled") is False


def unenforcing_clusters(stack: Stack) -> list[tuple[Resource, str]]:
    """The stack's clusters that would not enforce a NetworkPolicy, each with what would: an EKS cluster without
    the vpc-cni add-on's network policy agent, a GKE cluster without Dataplane V2 or its managed Calico."""
    found = []
    addons = [a for a in stack.of_type(tokens.AWS_EKS_ADDON) if a.get("addonName") == "vpc-cni"]
    for cluster in stack.of_type(tokens.AWS_EKS_CLUSTER):
        if not any(_addon_enables_policies(a) for a in addons):
            found.append((cluster, 'the vpc-cni add-on with configurationValues {"enableNetworkPolicy": "true"}'))
    for cluster in stack.of_type(tokens.GCP_CONTAINER_CLUSTER):
        if not _gke_enforces(cluster):
            found.append(
                (
                    cluster,
                    "datapathProvider ADVANCED_DATAPATH (Dataplane V2), or networkPolicy enabled with "
                    "addonsConfig.networkPolicyConfig.disabled false (Calico)",
                )
            )
    return found
