"""Training components under the recording mocks: what each declares for the plan it is given."""

from datetime import UTC, datetime

import pulumi
import pytest

from components.training.aws.filesystem import RunFileSystem, RunFileSystemArgs
from components.training.aws.nodes import TrainingNodes, TrainingNodesArgs, launched_instances
from components.training.aws.security import ClusterSecurity, ClusterSecurityArgs
from infra.catalog.aws import instance_type
from infra.training.aws.config import TrainingSpec
from infra.training.aws.plan import plan_training
from tests.helpers import by_type, one

NOW = datetime(2026, 11, 21, tzinfo=UTC)


def plan(**fields):
    spec = TrainingSpec.model_validate({"runId": "r1", "instanceType": "p4d.24xlarge", "nodeCount": 2, **fields})
    return plan_training(spec, "us-east-1", "test", now=NOW, dry_run=True)


def nodes_program(p):
    def program():
        TrainingNodes(
            "n",
            TrainingNodesArgs(
                plan=p,
                subnet_id="subnet-1",
                security_group_id="sg-1",
                instance_profile_arn="arn:profile",
                image_id="ami-0123456789abcdef0",
                root_device_name="/dev/xvda",
                root_volume_gib=300,
                user_data="#!/bin/bash\necho hi\n",
                tags=p.tags,
                partition="aws",
                account_id="123456789012",
            ),
        )

    return program


def test_odcr_targets_the_reservation_through_its_own_resource_group_and_uses_it_first(record):
    az = instance_type("p4d.24xlarge").azs("us-east-1")[2]
    p = plan(availabilityZone=az, capacity={"mode": "odcr", "reservationId": "cr-0123456789abcdef0"})
    result = record(nodes_program(p))
    assert result.errors == []
    assert by_type(result, "aws:ec2/placementGroup:PlacementGroup") == []
    group = one(result, "aws:resourcegroups/group:Group")
    assert group.inputs["configurations"] == [
        {"type": "AWS::EC2::CapacityReservationPool"},
        {
            "type": "AWS::ResourceGroups::Generic",
            "parameters": [{"name": "allowed-resource-types", "values": ["AWS::EC2::CapacityReservation"]}],
        },
    ]
    assert group.inputs["tags"]["mlinfra:run-id"] == "r1"
    membership = one(result, "aws:resourcegroups/resource:Resource")
    assert membership.inputs == {
        "groupArn": group.outputs["arn"],
        "resourceArn": "arn:aws:ec2:us-east-1:123456789012:capacity-reservation/cr-0123456789abcdef0",
    }
    template = one(result, "aws:ec2/launchTemplate:LaunchTemplate").inputs
    assert "instanceMarketOptions" not in template
    # EC2 Fleet launches nothing into a reservation the launch template names by id: the group's ARN only.
    assert template["capacityReservationSpecification"]["capacityReservationTarget"] == {
        "capacityReservationResourceGroupArn": group.outputs["arn"]
    }
    fleet = one(result, "aws:ec2/fleet:Fleet")
    assert membership.urn in fleet.dependencies  # the reservation is in the group before the fleet asks
    assert template["placement"] == {"availabilityZone": az}
    assert template["blockDeviceMappings"][0]["deviceName"] == "/dev/xvda"
    assert template["instanceInitiatedShutdownBehavior"] == "terminate"
    options = fleet.inputs["onDemandOptions"]
    assert options["minTargetCapacity"] == 2
    assert options["capacityReservationOptions"] == {"usageStrategy": "use-capacity-reservations-first"}


def test_every_interface_is_private_and_in_the_run_subnet(record):
    result = record(nodes_program(plan(instanceType="p5.48xlarge")))
    interfaces = one(result, "aws:ec2/launchTemplate:LaunchTemplate").inputs["networkInterfaces"]
    assert len(interfaces) == 33
    assert {(i["subnetId"], tuple(i["securityGroups"])) for i in interfaces} == {("subnet-1", ("sg-1",))}
    # EC2 refuses associatePublicIpAddress on launches with several interfaces.
    assert not [i for i in interfaces if "associatePublicIpAddress" in i]


def test_up_fails_unless_the_fleet_launched_every_node():
    sets = [{"instance_ids": ["i-2", "i-1"]}, {"instance_ids": ["i-3"]}]
    assert launched_instances(sets, 3, dry_run=False) == ["i-1", "i-2", "i-3"]
    assert launched_instances(None, 3, dry_run=True) == []
    with pytest.raises(pulumi.RunError, match="the fleet launched 0 of 3 nodes"):
        launched_instances([], 3, dry_run=False)
    with pytest.raises(pulumi.RunError, match="launched 2 of 3"):
        launched_instances([{"instance_ids": ["i-1", "i-2"]}], 3, dry_run=False)


def test_security_groups_open_nothing_to_address_ranges_but_node_egress(record):
    result = record(lambda: ClusterSecurity("c", ClusterSecurityArgs(vpc_id="vpc-1", tags={"k": "v"})))
    assert len(by_type(result, "aws:ec2/securityGroup:SecurityGroup")) == 2
    ingress = by_type(result, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    egress = by_type(result, "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")
    assert all("referencedSecurityGroupId" in r.inputs for r in ingress)
    assert [r.name for r in egress if "cidrIpv4" in r.inputs] == ["c-nodes-out"]
    # Lustre: 2 port ranges x (from nodes, from itself) into the file system, and back from it into the nodes.
    assert len([r for r in ingress if r.inputs["ipProtocol"] == "tcp"]) == 6


def file_system(record, deployment_type):
    p = plan(lustre={"deploymentType": deployment_type})
    result = record(
        lambda: RunFileSystem(
            "f",
            RunFileSystemArgs(
                plan=p.lustre,
                subnet_id="subnet-1",
                security_group_id="sg-2",
                registry_bucket="bucket-1",
                checkpoints_prefix="checkpoints/r1/",
                datasets_prefix="datasets/",
                tags={"k": "v"},
            ),
        )
    )
    return p, one(result, "aws:fsx/lustreFileSystem:LustreFileSystem").inputs


def test_scratch_file_system_takes_no_throughput_or_backup_settings(record):
    _, fs = file_system(record, "SCRATCH_2")
    assert fs["deploymentType"] == "SCRATCH_2"
    assert "perUnitStorageThroughput" not in fs and "automaticBackupRetentionDays" not in fs
    assert (fs["skipFinalBackup"], fs["dataCompressionType"], fs["securityGroupIds"]) == (True, "LZ4", ["sg-2"])


def test_persistent_file_system_has_throughput_and_no_automatic_backups(record):
    p, fs = file_system(record, "PERSISTENT_2")
    assert fs["perUnitStorageThroughput"] == p.lustre.per_unit_storage_throughput
    assert fs["automaticBackupRetentionDays"] == 0 and fs["storageCapacity"] == p.lustre.storage_capacity_gib
