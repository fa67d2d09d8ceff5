"""The pack's own entry point, started as the engine starts it, answering the analyzer protocol."""

import pytest
from google.protobuf import empty_pb2

from infra.tools.policy_runner.analyzer_client import AnalyzerClient
from infra.tools.policy_runner.runner import PACK_DIR
from infra.tools.preview_json import PolicyResource
from policies.pack import RULES
from tests.policies.policy_fixtures import launch_template_props, training_tags, urn


@pytest.fixture(scope="module")
def pack():
    with AnalyzerClient(PACK_DIR, "mlinfra", "training-demo", {"aws:region": "us-east-1"}) as client:
        client.handshake()
        client.configure_stack()
        yield client


def test_analyzer_info_lists_every_rule_with_its_level(pack):
    info = pack.info()
    assert (info.name, info.version) == ("mlinfra", "0.1.0")  # the version is PulumiPolicy.yaml's, as in the engine
    assert [(p.name, p.enforcement) for p in info.policies] == [(r.name, r.enforcement) for r in RULES]
    cost = next(p for p in info.policies if p.name == "stack-hourly-cost-under-ceiling")
    assert cost.stack_policy and cost.config_schema["maxHourlyCostUsd"]["default"] == 1000
    raw = pack.stub.GetAnalyzerInfo(empty_pb2.Empty())
    assert raw.supportsConfig


def template(**changes):
    props = launch_template_props()
    props.update(changes)
    return PolicyResource(
        urn=urn("training-demo", "aws:ec2/launchTemplate:LaunchTemplate", "template"),
        type="aws:ec2/launchTemplate:LaunchTemplate",
        name="template",
        custom=True,
        props=props,
    )


def test_analyze_reports_a_broken_resource(pack):
    pack.configure({})
    assert pack.analyze(template()) == []
    diagnostics = pack.analyze(template(metadataOptions={"httpTokens": "optional"}))
    assert [(d.policy, d.enforcement, d.message) for d in diagnostics] == [
        (
            "instance-metadata-requires-imdsv2",
            "mandatory",
            "metadataOptions.httpTokens is 'optional', which accepts IMDSv1; set it to 'required'",
        )
    ]
    assert diagnostics[0].description == (
        "Launch templates and instances require IMDSv2 (httpTokens 'required') with a response hop limit of 1."
    )


def test_unknown_values_reach_the_pack_as_unknowns(pack):
    unknown_string = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # how the engine marshals a value unknown in preview
    assert pack.analyze(template(metadataOptions={"httpTokens": unknown_string})) == []


def test_analyze_stack_and_configure(pack):
    fleet = PolicyResource(
        urn=urn("training-demo", "aws:ec2/fleet:Fleet", "fleet"),
        type="aws:ec2/fleet:Fleet",
        name="fleet",
        custom=True,
        props={
            "tags": training_tags(),
            "targetCapacitySpecification": {"totalTargetCapacity": 2},
            "launchTemplateConfigs": [{"overrides": [{"instanceType": "p4d.24xlarge"}]}],
        },
        protect=True,
    )
    found = {(d.policy, d.urn) for d in pack.analyze_stack([fleet])}
    assert ("training-resources-not-protected", fleet.urn) in found
    assert not any(p == "stack-hourly-cost-under-ceiling" for p, _ in found)  # $43.92 < $1000
    pack.configure(
        {
            "stack-hourly-cost-under-ceiling": {"enforcementLevel": "mandatory", "maxHourlyCostUsd": 40},
            "training-resources-not-protected": {"enforcementLevel": "disabled"},
        }
    )
    found = {(d.policy, d.enforcement) for d in pack.analyze_stack([fleet])}
    assert ("stack-hourly-cost-under-ceiling", "mandatory") in found
    assert not any(p == "training-resources-not-protected" for p, _ in found)
    pack.configure({})
