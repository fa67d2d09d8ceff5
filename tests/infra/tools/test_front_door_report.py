"""The report's front door lines, read from the preview with the pack's readers: the demo's secure door as it
is, a stack without a gateway, and insecure variants of the demo (the report says what is missing)."""

from __future__ import annotations

import dataclasses

import pytest

from infra.tools import preview_json
from infra.tools.front_door_report import lines
from infra.tools.offline.digest import to_digest
from infra.tools.offline.engine import preview

NLB = "service.beta.kubernetes.io/aws-load-balancer-"


@pytest.fixture(scope="module")
def demo() -> preview_json.PreviewDocument:
    return preview_json.parse(to_digest(preview("serving-demo", [])))


def without(document: preview_json.PreviewDocument, type_suffix: str) -> preview_json.PreviewDocument:
    kept = [r for r in document.resources if not r.type.endswith(type_suffix)]
    return dataclasses.replace(document, resources=kept)


def test_the_demo_s_door_is_tls_authenticated_limited_and_isolated(demo):
    text = "\n".join(lines(demo))
    assert "`https://models.example.com/v1`: TLS ended at the load balancer on 443 with `arn:aws:acm:" in text
    assert "callers: apiKeyAuth; reachable from any address" in text
    assert "limits per caller: 600 requests/minute, 200000 tokens/minute" in text
    assert "models routed by name: `llama-3-8b-neuron`, `mistral-7b`" in text
    assert "admit the gateway, the pickers and the scraper only" in text


def test_a_stack_without_a_gateway_says_so():
    document = preview_json.parse(to_digest(preview("serving-gpu-families", [])))
    (line,) = [x for x in lines(document) if x.startswith("No gateway")]
    assert "nothing outside the cluster reaches the models" in line


def test_missing_authentication_and_isolation_are_called_out(demo):
    text = "\n".join(lines(without(without(demo, ":SecurityPolicy"), ":NetworkPolicy")))
    assert "callers: **no authentication**" in text
    assert "**no NetworkPolicy: any pod in the cluster can call the model servers**" in text


def test_a_load_balancer_without_a_certificate_has_no_tls_endpoint(demo):
    resources = []
    for r in demo.resources:
        if r.type.endswith(":EnvoyProxy"):
            props = {**r.props}
            service = props["spec"]["provider"]["kubernetes"]["envoyService"]
            service = {**service, "annotations": {NLB + "scheme": "internet-facing"}}
            props["spec"] = {"provider": {**props["spec"]["provider"], "kubernetes": {"envoyService": service}}}
            r = dataclasses.replace(r, props=props)
        resources.append(r)
    text = "\n".join(lines(dataclasses.replace(demo, resources=resources)))
    assert "`(no TLS endpoint)`: **no TLS**" in text


def test_gke_s_door_ends_tls_at_the_listener_with_the_synced_certificate():
    document = preview_json.parse(to_digest(preview("serving-gcp-demo", [])))
    text = "\n".join(lines(document))
    assert (
        "`https://models.example.com/v1`: TLS at the listener with `front-door-tls` (kept from the secret store's "
        "`serving-gcp-demo-tls`)"
    ) in text
    assert "callers: apiKeyAuth; reachable from any address" in text
    assert "models routed by name: `llama-3-8b-l4`" in text
    # Without its sync the Secret is still named, its source not.
    bare = "\n".join(lines(without(document, ":ExternalSecret")))
    assert "TLS at the listener with `front-door-tls`\n" in bare + "\n"
