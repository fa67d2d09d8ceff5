"""The pack's analyzer (policies/analyzer.py: each resource decoded once per request, resource policies run
only on the types their rules read, the stack built once for all stack policies) reports exactly what the
policy SDK's own servicer reports, on every demo stack and on crafted misconfigurations."""

from __future__ import annotations

import pytest
from pulumi_policy import PolicyCustomTimeouts, PolicyResourceOptions, ResourceValidationArgs

from infra.tools import preview_json
from infra.tools.offline.digest import to_digest
from infra.tools.offline.engine import preview
from infra.tools.policy_runner import runner
from policies import adapters
from tests.policies import policy_fixtures as fx

UNKNOWN_STRING = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # how the engine marshals a value unknown in preview
DEMO_STACKS = [
    "registry",
    "training-demo",
    "serving-demo",
    "serving-gcp-demo",
    "training-gcp-demo",
    "registry-gcp-mirror",
]


def _broken_documents() -> dict[str, dict]:
    training = fx.training_resources()
    for resource in fx.training_resources():
        if resource.type == "aws:ec2/launchTemplate:LaunchTemplate":
            training = fx.changed(training, resource.name, "networkInterfaces.1", None, delete=True)
            training = fx.changed(training, resource.name, "metadataOptions.httpTokens", "optional")
    serving = fx.serving_resources()
    registry = fx.registry_resources()
    for resource in registry:
        if resource.type == "aws:s3/bucketVersioning:BucketVersioning":
            registry = fx.changed(registry, resource.name, "versioningConfiguration.status", "Suspended")
        if resource.type == "aws:s3/bucket:Bucket":
            registry = fx.changed(registry, resource.name, "", None, protect=False)
    return {
        "training-broken": fx.to_document(training, "training-demo"),
        "training-with-unknowns": fx.to_document(
            fx.changed(fx.training_resources(), fx.training_resources()[0].name, "tags", UNKNOWN_STRING),
            "training-demo",
        ),
        "serving": fx.to_document(serving, "serving-demo"),
        "registry-broken": fx.to_document(registry, "registry"),
    }


def _findings(document: dict, monkeypatch: pytest.MonkeyPatch, sdk_servicer: bool) -> list[tuple[str, ...]]:
    if sdk_servicer:
        monkeypatch.setenv("MLINFRA_POLICY_SDK_SERVICER", "1")
    else:
        monkeypatch.delenv("MLINFRA_POLICY_SDK_SERVICER", raising=False)
    run = runner.run(preview_json.parse(document))
    return [(v.policy, v.enforcement, v.urn, v.resource_type, v.message, v.source) for v in run.violations]


@pytest.mark.parametrize("stack", DEMO_STACKS)
def test_same_findings_as_the_sdks_servicer_on_demo_stacks(stack, monkeypatch):
    document = to_digest(preview(stack))
    assert _findings(document, monkeypatch, False) == _findings(document, monkeypatch, True)


@pytest.mark.parametrize("name", sorted(_broken_documents()))
def test_same_findings_as_the_sdks_servicer_on_broken_stacks(name, monkeypatch):
    document = _broken_documents()[name]
    ours = _findings(document, monkeypatch, False)
    assert ours == _findings(document, monkeypatch, True)
    if "broken" in name:
        assert ours, "the crafted stack must break some rule, or the comparison proves little"


def _args(props: dict, urn: str) -> ResourceValidationArgs:
    options = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)
    return ResourceValidationArgs("aws:s3/bucket:Bucket", props, urn, urn.rsplit("::", 1)[-1], options, None)


def test_one_record_per_request_shared_by_its_policies_never_by_the_next_request():
    """The analyzer hands every policy of a request the same decoded properties: the adapters build the rules'
    record once for them; another request (other decoded properties, even equal ones) gets its own."""
    props = {"bucket": "models", "tags": {"mlinfra:role": "registry"}}
    first = adapters._resource_of(_args(props, "urn:pulumi:s::p::aws:s3/bucket:Bucket::a"))
    assert adapters._resource_of(_args(props, "urn:pulumi:s::p::aws:s3/bucket:Bucket::a")) is first
    assert first.props == props and first.props is not props  # plain copies, not the SDK's objects
    other = adapters._resource_of(_args(dict(props), "urn:pulumi:s::p::aws:s3/bucket:Bucket::b"))
    assert other is not first and other.urn.endswith("::b") and other.name == "b"
