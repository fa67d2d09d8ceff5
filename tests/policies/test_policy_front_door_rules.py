"""The front door's rules on hand-made objects: gateway-listeners-use-tls, unauthenticated-gateways-restrict-sources
and model-servers-not-exposed-directly; each compliant form passes and each broken one gives its exact message."""

from __future__ import annotations

import pytest

from infra.providers import tokens as t
from infra.serving.front_door import model_server_network_policy
from policies.rules.serving import (
    gateway_listeners_use_tls,
    model_servers_admit_the_gateway_only,
    model_servers_not_exposed_directly,
    unauthenticated_gateways_restrict_sources,
)
from tests.policies.policy_fixtures import DEPLOYMENT, SERVING, model_deployment, res, stack_of

NLB = "service.beta.kubernetes.io/aws-load-balancer-"
CERT = "arn:aws:acm:us-east-1:123456789012:certificate/0f3c2a9e-5b7d-4e21-9c8a-1d2e3f4a5b6c"
NS = "envoy-gateway-system"


def gateway(protocol: str = "HTTP", port: float = 443.0) -> object:
    return res(
        t.K8S_GATEWAY,
        "door",
        {
            "metadata": {"name": "front-door", "namespace": NS},
            "spec": {
                "gatewayClassName": "mlinfra",
                "infrastructure": {
                    "parametersRef": {"group": "gateway.envoyproxy.io", "kind": "EnvoyProxy", "name": "front-door"}
                },
                "listeners": [{"name": "api", "protocol": protocol, "port": port}],
            },
        },
        SERVING,
    )


def proxy(annotations: dict | None = None, ranges: list[str] | None = None) -> object:
    service: dict = {"type": "LoadBalancer", "loadBalancerClass": "service.k8s.aws/nlb"}
    service["annotations"] = (
        {NLB + "scheme": "internet-facing", NLB + "ssl-cert": CERT, NLB + "ssl-ports": "443"}
        if annotations is None
        else annotations
    )
    if ranges is not None:
        service["loadBalancerSourceRanges"] = ranges
    props = {
        "metadata": {"name": "front-door", "namespace": NS},
        "spec": {"provider": {"type": "Kubernetes", "kubernetes": {"envoyService": service}}},
    }
    return res(t.K8S_ENVOY_PROXY, "proxy", props, SERVING)


def api_keys() -> object:
    props = {
        "metadata": {"name": "front-door", "namespace": NS},
        "spec": {
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "front-door"}],
            "apiKeyAuth": {"credentialRefs": [{"name": "keys"}], "extractFrom": [{"headers": ["Authorization"]}]},
        },
    }
    return res(t.K8S_ENVOY_SECURITY_POLICY, "keys", props, SERVING)


def run(module, resources) -> list[str]:
    return [f.message for f in module.RULE.check(stack_of(resources), module.RULE.defaults())]


# --- gateway-listeners-use-tls ---------------------------------------------------------------------


def test_http_behind_a_load_balancer_ending_tls_on_its_port_passes():
    assert run(gateway_listeners_use_tls, [gateway(), proxy()]) == []
    assert run(gateway_listeners_use_tls, [gateway("HTTPS"), proxy(annotations={})]) == []


def test_plain_http_to_the_internet_is_refused():
    expected = (
        "Gateway 'door' listener api serves HTTP on port 443 with nothing ending TLS in front of it, so API keys and "
        "prompts cross the network in clear; make it HTTPS with a certificate, or end TLS at the load balancer (its "
        "certificate and TLS port on the EnvoyProxy's Service, as mlinfra:serving.gateway does)"
    )
    assert run(gateway_listeners_use_tls, [gateway(), proxy(annotations={NLB + "scheme": "internet-facing"})]) == [
        expected
    ]
    assert run(gateway_listeners_use_tls, [gateway()]) == [expected]  # no EnvoyProxy: nothing in front


def test_tls_on_another_port_than_the_listener_s_is_refused():
    annotations = {NLB + "ssl-cert": CERT, NLB + "ssl-ports": "8443"}
    assert len(run(gateway_listeners_use_tls, [gateway(), proxy(annotations=annotations)])) == 1
    annotations[NLB + "ssl-ports"] = "8443, 443"
    assert run(gateway_listeners_use_tls, [gateway(), proxy(annotations=annotations)]) == []


# --- unauthenticated-gateways-restrict-sources -------------------------------------------------------


def test_an_authenticated_gateway_may_be_open_to_any_address():
    assert run(unauthenticated_gateways_restrict_sources, [gateway(), proxy(), api_keys()]) == []


def test_an_unauthenticated_gateway_open_to_the_internet_is_refused():
    expected = [
        "Gateway 'door' authenticates no caller and its load balancer takes connections from any address, so anyone "
        "who finds it can spend the models' accelerators; authenticate callers (a SecurityPolicy with apiKeyAuth, or "
        "mlinfra:serving.gateway.auth api-key) or list the allowed networks in loadBalancerSourceRanges "
        "(gateway.sourceCidrs)"
    ]
    assert run(unauthenticated_gateways_restrict_sources, [gateway(), proxy()]) == expected
    halves = proxy(ranges=["0.0.0.0/1", "128.0.0.0/1"])
    assert run(unauthenticated_gateways_restrict_sources, [gateway(), halves]) == expected


def test_an_unauthenticated_gateway_on_named_networks_or_internal_passes():
    assert run(unauthenticated_gateways_restrict_sources, [gateway(), proxy(ranges=["198.51.100.0/24"])]) == []
    internal = proxy(annotations={NLB + "scheme": "internal"})
    assert run(unauthenticated_gateways_restrict_sources, [gateway(), internal]) == []
    # The controller's own class defaults to internal when no scheme is named.
    assert run(unauthenticated_gateways_restrict_sources, [gateway(), proxy(annotations={})]) == []


# --- model-servers-not-exposed-directly ------------------------------------------------------------


def service(kind: str, selector: dict) -> object:
    props = {"metadata": {"name": "llama", "namespace": "models"}, "spec": {"type": kind, "selector": selector}}
    return res(t.K8S_SERVICE, "llama-service", props, SERVING)


def test_a_cluster_ip_service_of_a_model_server_passes():
    server = res(DEPLOYMENT, "llama", model_deployment(), SERVING)
    labels = server.props["spec"]["template"]["metadata"]["labels"]
    assert run(model_servers_not_exposed_directly, [server, service("ClusterIP", labels)]) == []


def test_a_load_balancer_or_node_port_in_front_of_a_model_server_is_refused():
    server = res(DEPLOYMENT, "llama", model_deployment(), SERVING)
    labels = server.props["spec"]["template"]["metadata"]["labels"]
    for kind in ("LoadBalancer", "NodePort"):
        assert run(model_servers_not_exposed_directly, [server, service(kind, labels)]) == [
            f"Service 'llama-service' ({kind}) sends traffic from outside the cluster straight to model server "
            "'llama', past the gateway's TLS, authentication and limits; make it a ClusterIP Service and publish the "
            "model through the stack's gateway (mlinfra:serving.gateway)"
        ]
    other = {**labels, "app.kubernetes.io/instance": "someone-else"}
    assert run(model_servers_not_exposed_directly, [server, service("LoadBalancer", other)]) == []


def route(namespace: str = "models", name: str = "front-door") -> object:
    props = {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "parentRefs": [
                {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "front-door", "namespace": NS}
            ]
        },
    }
    return res(t.K8S_AI_GATEWAY_ROUTE, f"route-{name}", props, SERVING)


def route_policy(auth: bool, namespace: str = "models") -> object:
    body: dict = {"targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "front-door"}]}
    body["authorization"] = {"defaultAction": "Allow"}
    if auth:
        body["apiKeyAuth"] = {"credentialRefs": [{"name": "keys"}], "extractFrom": [{"headers": ["Authorization"]}]}
    props = {"metadata": {"name": "cors", "namespace": namespace}, "spec": body}
    return res(t.K8S_ENVOY_SECURITY_POLICY, "route-policy", props, SERVING)


def test_a_route_policy_without_authentication_replaces_the_gateway_s():
    resources = [gateway(), proxy(), api_keys(), route()]
    assert run(unauthenticated_gateways_restrict_sources, resources) == []
    assert run(unauthenticated_gateways_restrict_sources, [*resources, route_policy(auth=True)]) == []
    assert run(unauthenticated_gateways_restrict_sources, [*resources, route_policy(auth=False)]) == [
        "SecurityPolicy 'route-policy' on route 'route-front-door' of Gateway 'door' identifies no caller, and Envoy "
        "Gateway applies it in place of the Gateway's authentication, so that route is open to any address; add the "
        "Gateway's authentication to it (apiKeyAuth) or remove it"
    ]
    # A policy in another namespace targets another route of the same name: not this Gateway's.
    assert run(unauthenticated_gateways_restrict_sources, [*resources, route_policy(auth=False, namespace="x")]) == []
    # Behind named networks the route policy is no exposure.
    named = [gateway(), proxy(ranges=["198.51.100.0/24"]), api_keys(), route(), route_policy(auth=False)]
    assert run(unauthenticated_gateways_restrict_sources, named) == []


def test_gke_s_internal_passthrough_load_balancer_is_internal():
    internal = proxy(annotations={"networking.gke.io/load-balancer-type": "Internal"})
    assert run(unauthenticated_gateways_restrict_sources, [gateway(), internal]) == []
    external = proxy(annotations={"cloud.google.com/l4-rbs": "enabled"})
    external.props["spec"]["provider"]["kubernetes"]["envoyService"].pop("loadBalancerClass")
    assert len(run(unauthenticated_gateways_restrict_sources, [gateway(), external])) == 1


# --- model-servers-admit-the-gateway-only --------------------------------------------------------------


def servers_policy(**changes) -> object:
    manifest = model_server_network_policy("models", ["llama-epp"])
    manifest["spec"].update(changes)
    return res(t.K8S_NETWORK_POLICY, "model-servers", manifest, SERVING)


def server() -> object:
    return res(DEPLOYMENT, "llama", model_deployment(), SERVING)


def enforcing_eks() -> list[object]:
    cluster = res(t.AWS_EKS_CLUSTER, "eks", {"name": "c"}, SERVING)
    addon = res(
        t.AWS_EKS_ADDON, "vpc-cni", {"addonName": "vpc-cni", "configurationValues": '{"enableNetworkPolicy": "true"}'}
    )
    return [cluster, addon]


def test_servers_admitting_named_peers_on_an_enforcing_cluster_pass():
    assert run(model_servers_admit_the_gateway_only, [server(), servers_policy(), *enforcing_eks()]) == []
    gke = res(t.GCP_CONTAINER_CLUSTER, "gke", {"datapathProvider": "ADVANCED_DATAPATH"}, SERVING)
    assert run(model_servers_admit_the_gateway_only, [server(), servers_policy(), gke]) == []
    calico = {"networkPolicy": {"enabled": True, "provider": "CALICO"}, "addonsConfig": {"networkPolicyConfig": {}}}
    calico["addonsConfig"]["networkPolicyConfig"]["disabled"] = False
    assert (
        run(
            model_servers_admit_the_gateway_only,
            [server(), servers_policy(), res(t.GCP_CONTAINER_CLUSTER, "g", calico)],
        )
        == []
    )


def test_a_server_no_policy_selects_is_refused():
    expected = [
        "model server 'llama': no NetworkPolicy limits its pods' ingress, so any pod in the cluster can call it past "
        "the gateway; declare a NetworkPolicy admitting only the gateway's proxies, the endpoint pickers and the "
        "metrics scraper (mlinfra's serving stacks declare model-servers)"
    ]
    assert run(model_servers_admit_the_gateway_only, [server(), *enforcing_eks()]) == expected
    # A policy of another namespace, of other pods, or limiting egress only, does not select it.
    elsewhere = servers_policy()
    elsewhere.props["metadata"]["namespace"] = "default"
    others = servers_policy(podSelector={"matchLabels": {"app.kubernetes.io/name": "something-else"}})
    egress = servers_policy(policyTypes=["Egress"])
    for policy in (elsewhere, others, egress):
        assert run(model_servers_admit_the_gateway_only, [server(), policy, *enforcing_eks()]) == expected


@pytest.mark.parametrize(
    "ingress, reason",
    [
        ([{}], "ingress[0] has no `from`, so every source"),
        (
            [{"from": [{"namespaceSelector": {}}]}],
            "ingress[0] admits every pod of every namespace (namespaceSelector {})",
        ),
        (
            [{"from": [{"namespaceSelector": {}, "podSelector": {}}]}],
            "ingress[0] admits every pod of every namespace (namespaceSelector {})",
        ),
        ([{"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}], "ingress[0] admits ipBlock 0.0.0.0/0"),
    ],
)
def test_a_policy_admitting_any_pod_is_refused(ingress, reason):
    # Policies add up: a second, open policy opens the server whatever the first one names.
    found = run(
        model_servers_admit_the_gateway_only,
        [server(), servers_policy(), servers_policy(ingress=ingress), *enforcing_eks()],
    )
    assert found == [
        f"NetworkPolicy 'model-servers' selects model server 'llama' and {reason}, so any pod in the cluster can call "
        "the server past the gateway; name the peers by namespace and labels (the gateway's proxies, the pickers, "
        "the scraper)"
    ]


def test_a_cluster_that_enforces_no_network_policy_is_refused():
    (found,) = run(
        model_servers_admit_the_gateway_only, [server(), servers_policy(), res(t.AWS_EKS_CLUSTER, "eks", {}, SERVING)]
    )
    assert found.startswith("cluster 'eks' enforces no NetworkPolicy") and "enableNetworkPolicy" in found
    plain_addon = res(t.AWS_EKS_ADDON, "vpc-cni", {"addonName": "vpc-cni", "configurationValues": "{}"})
    assert (
        len(
            run(
                model_servers_admit_the_gateway_only,
                [server(), servers_policy(), res(t.AWS_EKS_CLUSTER, "eks", {}), plain_addon],
            )
        )
        == 1
    )
    (found,) = run(
        model_servers_admit_the_gateway_only, [server(), servers_policy(), res(t.GCP_CONTAINER_CLUSTER, "gke", {})]
    )
    assert found.startswith("cluster 'gke' enforces no NetworkPolicy") and "ADVANCED_DATAPATH" in found
    # Calico's switch without its add-on enforces nothing.
    half = res(t.GCP_CONTAINER_CLUSTER, "gke", {"networkPolicy": {"enabled": True}})
    assert len(run(model_servers_admit_the_gateway_only, [server(), servers_policy(), half])) == 1
