"""The training stack through the offline preview: the real program, its config, its outputs."""

import base64
import gzip
import json

import pytest

from infra.catalog.aws import instance_type
from infra.catalog.roles import types_for
from infra.core.tags import missing_contract_tags
from infra.tools.offline.engine import preview
from tests.helpers import by_type, one, run_cli, taggable

US_EAST_2 = [("aws:region", "us-east-2"), ("mlinfra:registryStack", "registry-us-east-2")]


def region_overrides(name: str) -> list:
    """p5e and trn2 are not offered in us-east-1 (catalog); they run in us-east-2 next to its registry."""
    return [] if instance_type(name).azs("us-east-1") else US_EAST_2


@pytest.fixture(scope="module")
def demo():
    return preview("training-demo")


def test_demo_previews_without_errors_or_unknown_properties(demo):
    assert demo.errors == []
    assert not [d for d in demo.diagnostics if "unknown property" in d.message]


def test_every_taggable_resource_carries_the_run_tags(demo):
    tagged = [s for s in demo.resources() if taggable(s)]
    assert len(tagged) > 20
    for step in tagged:
        assert missing_contract_tags("training", step.inputs.get("tags")) == [], step.urn
        assert step.inputs["tags"]["mlinfra:run-id"] == "demo-llama-7b-001"
    template = one(demo, "aws:ec2/launchTemplate:LaunchTemplate").inputs
    kinds = {spec["resourceType"] for spec in template["tagSpecifications"]}
    assert kinds == {"instance", "volume", "network-interface"}
    for spec in template["tagSpecifications"]:
        assert missing_contract_tags("training", spec["tags"]) == []


def test_nothing_in_a_training_stack_is_protected_or_retained(demo):
    assert [s.urn for s in demo.resources() if s.protect or s.retain_on_delete] == []


def test_security_groups_carry_efa_self_rules_lustre_ports_and_no_open_ingress(demo):
    ingress = by_type(demo, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    egress = by_type(demo, "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")
    assert not [r for r in ingress if "cidrIpv4" in r.inputs or "cidrIpv6" in r.inputs]
    self_rules = [
        r
        for r in ingress + egress
        if r.inputs["ipProtocol"] == "-1" and r.inputs.get("referencedSecurityGroupId") == r.inputs["securityGroupId"]
    ]
    assert len(self_rules) == 2  # EFA: all traffic in and out, peer = the group itself
    lustre_ports = {(r.inputs["fromPort"], r.inputs["toPort"]) for r in ingress if r.inputs["ipProtocol"] == "tcp"}
    assert lustre_ports == {(988, 988), (1018, 1023)}


def test_network_is_private_with_s3_gateway_and_nat(demo):
    vpc = one(demo, "aws:ec2/vpc:Vpc").inputs
    assert vpc["enableDnsHostnames"] and vpc["enableDnsSupport"]
    for subnet in by_type(demo, "aws:ec2/subnet:Subnet"):
        assert subnet.inputs["mapPublicIpOnLaunch"] is False
        assert subnet.inputs["availabilityZone"] == demo.outputs["availabilityZone"]
    endpoint = one(demo, "aws:ec2/vpcEndpoint:VpcEndpoint").inputs
    assert (endpoint["serviceName"], endpoint["vpcEndpointType"]) == ("com.amazonaws.us-east-1.s3", "Gateway")
    assert len(by_type(demo, "aws:ec2/natGateway:NatGateway")) == 1


def test_launch_template_is_imdsv2_encrypted_and_ssm_imaged(demo):
    template = one(demo, "aws:ec2/launchTemplate:LaunchTemplate").inputs
    assert template["metadataOptions"]["httpTokens"] == "required"
    [root] = template["blockDeviceMappings"]
    assert root["ebs"] == {"volumeType": "gp3", "volumeSize": 200, "encrypted": "true", "deleteOnTermination": "true"}
    assert root["deviceName"] == "/dev/sda1"
    assert template["imageId"].startswith("ami-0offline")
    assert template["iamInstanceProfile"]["arn"].startswith("arn:aws:iam::123456789012:instanceprofile/")
    assert template["placement"]["groupName"].startswith("run-demo-llama-7b-001-placement-")


def test_user_data_runs_the_job_and_writes_the_marker(demo):
    template = one(demo, "aws:ec2/launchTemplate:LaunchTemplate").inputs
    script = gzip.decompress(base64.b64decode(template["userData"])).decode()
    assert script.startswith("#!/bin/bash")
    assert "MLINFRA_MARKER_URI=s3://mlinfra-registry-123456789012-us-east-1/runs/demo-llama-7b-001\n" in script
    assert f"@tcp:/{demo.outputs['lustreMountName']}" in script and demo.outputs["lustreDnsName"] in script
    assert "/opt/pytorch/bin/torchrun" in script and '--nnodes="$MLINFRA_NODE_COUNT"' in script
    assert "MLINFRA_NODE_COUNT=4" in script and "MLINFRA_EFA_DEVICES=4" in script
    assert "--sse-kms-key-id arn:aws:kms:us-east-1:123456789012:key/" in script


def test_fleet_is_all_or_nothing_in_one_az_and_terminates_on_delete(demo):
    fleet = one(demo, "aws:ec2/fleet:Fleet").inputs
    assert fleet["type"] == "instant" and fleet["terminateInstances"] is True
    assert fleet["targetCapacitySpecification"] == {"defaultTargetCapacityType": "on-demand", "totalTargetCapacity": 4}
    assert fleet["onDemandOptions"] == {
        "minTargetCapacity": 4,
        "singleAvailabilityZone": True,
        "singleInstanceType": True,
    }
    [config] = fleet["launchTemplateConfigs"]
    assert config["overrides"] == [
        {"availabilityZone": demo.outputs["availabilityZone"], "instanceType": "p4d.24xlarge"}
    ]
    assert one(demo, "aws:ec2/placementGroup:PlacementGroup").inputs["strategy"] == "cluster"


def test_lustre_is_linked_to_the_registry_in_the_nodes_subnet(demo):
    fs = one(demo, "aws:fsx/lustreFileSystem:LustreFileSystem").inputs
    assert fs["dataCompressionType"] == "LZ4" and fs["skipFinalBackup"] is True
    assert fs["fileSystemTypeVersion"] == "2.15"
    assert fs["subnetIds"].startswith("run-demo-llama-7b-001-private-")
    links = {
        s.inputs["fileSystemPath"]: s.inputs
        for s in by_type(demo, "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")
    }
    bucket = "s3://mlinfra-registry-123456789012-us-east-1/"
    assert links["/datasets"]["dataRepositoryPath"] == bucket + "datasets/"
    # Datasets are read-only in a run: imported once on create, with no automatic import (which would put S3
    # event notifications on the shared registry bucket, overlapping a concurrent run's) and no export.
    assert links["/datasets"]["batchImportMetaDataOnCreate"] is True
    assert "s3" not in links["/datasets"]
    assert links["/checkpoints"]["dataRepositoryPath"] == bucket + "checkpoints/demo-llama-7b-001/"
    assert links["/checkpoints"]["s3"]["autoExportPolicy"]["events"] == ["NEW", "CHANGED"]
    assert "autoImportPolicy" not in links["/checkpoints"]["s3"]


def test_lustre_waits_for_its_port_rules_and_the_datasets_import(demo):
    fs = one(demo, "aws:fsx/lustreFileSystem:LustreFileSystem")
    port_rules = [
        s
        for s in demo.resources()
        if s.type == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule" and s.inputs.get("fromPort") == 988
    ]
    # FSx refuses to create the file system while 988 is not open to and from its group (aws-parallelcluster #6181).
    assert len(port_rules) == 3 and all(rule.urn in fs.dependencies for rule in port_rules)
    datasets = [
        s
        for s in by_type(demo, "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")
        if s.inputs["fileSystemPath"] == "/datasets"
    ][0]
    assert datasets.custom_timeouts == {"create": "2h"}  # the provider's 10-minute default is short for datasets/


def test_node_role_reaches_the_registry_only_through_its_grants(demo):
    policies = {
        s.name: json.loads(s.inputs["policy"])
        for s in by_type(demo, "aws:iam/rolePolicy:RolePolicy")
        if "mlinfra:training:NodeRole" in s.parent
    }
    resources = sorted(
        r
        for doc in policies.values()
        for st in doc["Statement"]
        if st["Sid"].startswith("RegistryRead") or st["Sid"].startswith("RegistryWrite")
        for r in st["Resource"]
    )
    bucket = "arn:aws:s3:::mlinfra-registry-123456789012-us-east-1/"
    assert resources == [
        bucket + "checkpoints/demo-llama-7b-001/*",
        bucket + "datasets/*",
        bucket + "runs/demo-llama-7b-001/*",
    ]  # never models/: a run's job may not replace a served model's weights, manifest or alias
    attachment = one(demo, "aws:iam/rolePolicyAttachment:RolePolicyAttachment").inputs
    assert attachment["policyArn"] == "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"


def test_outputs(demo):
    out = demo.outputs
    assert out["runId"] == "demo-llama-7b-001" and out["nodeCount"] == 4
    assert len(out["nodePrivateIps"]) == 4 and out["rendezvousHost"] == sorted(out["nodePrivateIps"])[0]
    assert out["lustreDnsName"].endswith(".fsx.us-east-1.amazonaws.com") and out["lustreMountName"]
    assert out["registryPrefixes"] == {
        "datasets": "datasets/",
        "checkpoints": "checkpoints/demo-llama-7b-001/",
        "runs": "runs/demo-llama-7b-001/",
    }
    assert out["expiresAt"].endswith("Z")
    assert out["efa"] == {"devicesPerNode": 4, "ipBearingInterfaces": 1, "bandwidthShare": 1.0}


def test_the_plan_is_explained_in_the_preview(demo):
    notes = [d.message for d in demo.diagnostics if d.severity == "info"]
    assert any("EFA on 4 cards (100% of node bandwidth)" in n and "provisional" in n for n in notes)
    assert sum(n.startswith("lustre: ") for n in notes) >= 4


@pytest.mark.parametrize("name", types_for("training"))
def test_each_training_type_previews_with_efa_on_every_card_and_one_ip(name):
    result = preview("training-demo", [("mlinfra:training.instanceType", name), *region_overrides(name)])
    assert result.errors == []
    interfaces = one(result, "aws:ec2/launchTemplate:LaunchTemplate").inputs["networkInterfaces"]
    cards = {c.index for c in instance_type(name).network_cards}
    assert {i["networkCardIndex"] for i in interfaces if i["interfaceType"] == "efa-only"} == cards
    assert [i["interfaceType"] for i in interfaces].count("interface") == 1
    assert result.outputs["efa"]["bandwidthShare"] == 1.0


def test_capacity_block_has_market_type_reservation_and_no_placement_group():
    az = instance_type("p5.48xlarge").azs("us-east-1")[0]
    result = preview(
        "training-demo",
        [
            ("mlinfra:training.instanceType", "p5.48xlarge"),
            ("mlinfra:training.availabilityZone", az),
            ("mlinfra:training.capacity.mode", "capacity-block"),
            ("mlinfra:training.capacity.reservationId", "cr-0123456789abcdef0"),
            ("mlinfra:training.capacity.reservedCount", "4"),
        ],
    )
    assert result.errors == []
    assert by_type(result, "aws:ec2/placementGroup:PlacementGroup") == []
    template = one(result, "aws:ec2/launchTemplate:LaunchTemplate").inputs
    assert template["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert template["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}
    }
    assert "groupName" not in template["placement"]
    assert by_type(result, "aws:resourcegroups/group:Group") == []  # a block is targeted by its id
    fleet = one(result, "aws:ec2/fleet:Fleet").inputs
    assert fleet["targetCapacitySpecification"]["defaultTargetCapacityType"] == "capacity-block"
    assert "onDemandOptions" not in fleet


@pytest.mark.parametrize("nodes", [1, 256])
def test_node_counts_at_the_bounds_preview_with_the_same_resources(demo, nodes):
    result = preview("training-demo", [("mlinfra:training.nodeCount", str(nodes))])
    assert result.errors == []
    assert len(result.resources()) == len(demo.resources())  # nodes come from one fleet, not one resource each
    assert len(result.outputs["nodePrivateIps"]) == nodes


def test_endpoints_egress_and_bring_your_own_network():
    endpoints = preview("training-demo", [("mlinfra:training.network.egress", "endpoints")])
    assert endpoints.errors == [] and by_type(endpoints, "aws:ec2/natGateway:NatGateway") == []
    services = {
        s.inputs["serviceName"].rsplit(".", 1)[-1] for s in by_type(endpoints, "aws:ec2/vpcEndpoint:VpcEndpoint")
    }
    assert {"s3", "ssmmessages", "dkr", "api", "logs", "sts"} <= services
    own = preview(
        "training-demo",
        [
            ("mlinfra:training.network.vpcId", "vpc-0123456789abcdef0"),
            ("mlinfra:training.network.subnetId", "subnet-0123456789abcdef0"),
            ("mlinfra:training.availabilityZone", "us-east-1b"),
        ],
    )
    assert own.errors == [] and by_type(own, "aws:ec2/vpc:Vpc") == [] and by_type(own, "aws:ec2/subnet:Subnet") == []
    assert one(own, "aws:fsx/lustreFileSystem:LustreFileSystem").inputs["subnetIds"] == "subnet-0123456789abcdef0"


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "mlinfra:training.instanceType=g5.xlarge",
            "error: mlinfra:training.instanceType: g5.xlarge is a serving type; training takes one of: p4d.24xlarge, "
            "p4de.24xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge, trn1.32xlarge, trn1n.32xlarge, trn2.48xlarge",
        ),
        (
            "mlinfra:training.lustre.perUnitStorageThroughput=300",
            "error: mlinfra:training.lustre.perUnitStorageThroughput: 300 is not a PERSISTENT_2 throughput; "
            "allowed: 125, 250, 500, 1000 MB/s/TiB",
        ),
        ("mlinfra:training.nodeCount=0", "error: mlinfra:training.nodeCount: must be at least 1 (got 0)"),
        (
            "aws:region=us-east-2",
            "error: aws:region: us-east-2 differs from the region of registry stack 'registry' (us-east-1); "
            "FSx for Lustre "
            "links only to buckets of its own region: run in the registry's region or reference a registry "
            "stack in this one",
        ),
    ],
)
def test_bad_input_exits_2_naming_the_field(override, message):
    done = run_cli("preview", "--stack", "training-demo", "-c", override)
    assert (done.returncode, done.stderr.strip(), done.stdout) == (2, message, "")


def test_capacity_block_without_reservation_exits_2():
    done = run_cli(
        "preview",
        "--stack",
        "training-demo",
        "-c",
        "mlinfra:training.capacity.mode=capacity-block",
        "-c",
        "mlinfra:training.availabilityZone=us-east-1a",
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: mlinfra:training.capacity.reservationId: required when capacity.mode is "
        "capacity-block: the reservation id (cr-...)"
    )
