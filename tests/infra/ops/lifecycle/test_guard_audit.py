"""`audit --run-id R` against the moto server: leaked run resources are found, a clean account is clean,
and what the tagging API still lists after a destroy is confirmed by a direct describe."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from infra.core.errors import InputError
from infra.ops.lifecycle.audit import audit, audit_main, render_leftovers
from infra.ops.lifecycle.aws.audit_confirm import CONFIRMERS, presence
from infra.ops.lifecycle.ports import Leftover
from tests.infra.ops.lifecycle.aws_world import AMI, REGION, make_run, run_tags

ROLE = "arn:aws:iam::123456789012:role/mlinfra-scheduler"

ACCOUNT = "123456789012"


def short_id(identifier: str) -> str:
    """vol-1 from its ARN, a log group's name from its ARN."""
    if ":log-group:" in identifier:
        return identifier.split(":log-group:", 1)[1]
    return identifier.rsplit("/", 1)[-1]


def ec2_arn(kind: str, ident: str) -> str:
    return f"arn:aws:ec2:{REGION}:{ACCOUNT}:{kind}/{ident}"


def spec(resource_type: str, run_id: str = "run-a") -> list[dict]:
    return [{"ResourceType": resource_type, "Tags": run_tags(run_id)}]


def tear_down(aws, run) -> None:
    """What a teardown that worked does: nodes terminated, file system deleted (and gone), subnet and VPC
    deleted."""
    aws.ec2.terminate_instances(InstanceIds=run.instance_ids)
    if run.file_system_id:
        aws.fsx.delete_file_system(FileSystemId=run.file_system_id)  # SCRATCH_2: no LustreConfiguration
        aws.set_file_system(run.file_system_id, "DELETED")
    aws.ec2.delete_subnet(SubnetId=run.subnet_id)
    aws.ec2.delete_vpc(VpcId=run.vpc_id)


def leak(aws, run_id: str) -> dict[str, str]:
    """A run torn down except for what typically survives: an interface, a volume, the guard's log group,
    a final backup."""
    run = make_run(aws, run_id, deployment_type="PERSISTENT_2")  # scratch file systems take no backups
    tags = run_tags(run_id)
    backup = aws.fsx.create_backup(FileSystemId=run.file_system_id, Tags=tags)["Backup"]["BackupId"]
    aws.ec2.terminate_instances(InstanceIds=run.instance_ids)
    aws.fsx.delete_file_system(FileSystemId=run.file_system_id, LustreConfiguration={"SkipFinalBackup": True})
    aws.set_file_system(run.file_system_id, "DELETED")
    eni = aws.ec2.create_network_interface(
        SubnetId=run.subnet_id, TagSpecifications=[{"ResourceType": "network-interface", "Tags": tags}]
    )["NetworkInterface"]["NetworkInterfaceId"]
    untagged_eni = aws.ec2.create_network_interface(SubnetId=run.subnet_id)["NetworkInterface"]["NetworkInterfaceId"]
    volume = aws.ec2.create_volume(
        AvailabilityZone=f"{REGION}a", Size=8, TagSpecifications=[{"ResourceType": "volume", "Tags": tags}]
    )["VolumeId"]
    log_group = f"/aws/lambda/mlinfra-guard-{run_id}"
    aws.logs.create_log_group(logGroupName=log_group)  # Lambda creates it untagged
    return {
        "backup": backup,
        "eni": eni,
        "untagged_eni": untagged_eni,
        "volume": volume,
        "log_group": log_group,
        "vpc": run.vpc_id,
        "subnet": run.subnet_id,
    }


def test_audit_finds_what_the_run_leaked(aws, capsys):
    leaked = leak(aws, "run-a")
    other = make_run(aws, "run-ab")  # a run whose id starts with ours
    aws.logs.create_log_group(logGroupName="/aws/lambda/mlinfra-guard-run-ab")

    found = {(left.kind, short_id(left.identifier)): left.found_by for left in audit("run-a", aws.session)}

    assert found[("ec2:network-interface", leaked["eni"])] == "tagging-api+network-interfaces"
    assert found[("ec2:network-interface", leaked["untagged_eni"])] == "network-interfaces"
    assert found[("ec2:volume", leaked["volume"])] == "tagging-api+volumes"
    assert found[("logs:log-group", leaked["log_group"])] == "log-groups"
    assert found[("fsx:backup", leaked["backup"])] == "tagging-api+fsx-backups"
    assert ("ec2:vpc", leaked["vpc"]) in found and ("ec2:subnet", leaked["subnet"]) in found
    assert {ident for kind, ident in found if kind == "ec2:network-interface"} == {
        leaked["eni"],
        leaked["untagged_eni"],
    }, "the terminated nodes' own interfaces go with them"
    assert not any(kind in ("ec2:instance", "fsx:file-system", "fsx:association", "fsx:task") for kind, _ in found), (
        "terminated/deleted count as gone; tasks are ignored"
    )
    assert not any(other.vpc_id in ident or "run-ab" in ident for _, ident in found)

    assert audit_main("run-a", REGION, as_json=False) == 1
    out = capsys.readouterr().out
    for ident in (leaked["eni"], leaked["untagged_eni"], leaked["volume"], leaked["log_group"], leaked["backup"]):
        assert ident in out


def test_audit_json_lists_the_leftovers(aws, capsys):
    leaked = leak(aws, "run-a")
    assert audit_main("run-a", REGION, as_json=True) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["run_id"] == "run-a" and document["clean"] is False
    assert {
        "kind": "ec2:volume",
        "identifier": ec2_arn("volume", leaked["volume"]),
        "found_by": "tagging-api+volumes",
    } in document["leftovers"]


def test_audit_of_a_torn_down_run_is_clean(aws, capsys):
    tear_down(aws, make_run(aws, "run-a"))
    make_run(aws, "run-b")  # another run still going
    aws.logs.create_log_group(logGroupName="/aws/lambda/mlinfra-guard-run-b")
    assert audit("run-a", aws.session) == []
    assert audit_main("run-a", REGION, as_json=False) == 0
    assert "nothing left" in capsys.readouterr().out


def test_what_the_tagging_api_still_lists_right_after_a_destroy_is_not_a_leftover(aws):
    run = make_run(aws, "run-a", lustre=False)
    eip = aws.ec2.allocate_address(Domain="vpc", TagSpecifications=spec("elastic-ip"))["AllocationId"]
    nat = aws.ec2.create_nat_gateway(SubnetId=run.subnet_id, AllocationId=eip, TagSpecifications=spec("natgateway"))[
        "NatGateway"
    ]["NatGatewayId"]
    aws.ec2.delete_nat_gateway(NatGatewayId=nat)
    aws.ec2.release_address(AllocationId=eip)
    listed = {
        m["ResourceARN"]
        for m in aws.tagging.get_resources(TagFilters=[{"Key": "mlinfra:run-id", "Values": ["run-a"]}])[
            "ResourceTagMappingList"
        ]
    }
    assert ec2_arn("natgateway", nat) in listed, "the emulator, like AWS, still lists the deleted NAT gateway"
    tear_down(aws, run)
    assert audit("run-a", aws.session) == []


def test_a_file_system_being_deleted_is_reported_as_being_deleted(aws):
    run = make_run(aws, "run-a", nodes=1)
    aws.ec2.terminate_instances(InstanceIds=run.instance_ids)
    aws.fsx.delete_file_system(FileSystemId=run.file_system_id)
    found = {(left.kind, short_id(left.identifier)): left.found_by for left in audit("run-a", aws.session)}
    assert found[("fsx:file-system", run.file_system_id)] == "tagging-api+file-systems; being deleted"
    associations = [found_by for (kind, _), found_by in found.items() if kind == "fsx:association"]
    assert associations == ["tagging-api; being deleted"] * 2, "its associations go with it"
    assert "being deleted" in render_leftovers(audit("run-a", aws.session))
    aws.set_file_system(run.file_system_id, "DELETED")
    assert not any(left.kind.startswith("fsx:") for left in audit("run-a", aws.session))


def test_a_running_node_is_a_leftover(aws):
    run = make_run(aws, "run-a", nodes=1, lustre=False)
    kinds = {(left.kind, left.found_by) for left in audit("run-a", aws.session)}
    assert ("ec2:instance", "tagging-api+instances+run-network") in kinds
    assert run.instance_ids[0] in render_leftovers(audit("run-a", aws.session))


def test_what_bills_in_the_runs_network_is_found_whatever_its_tags_and_the_expiry_schedule_by_name(aws):
    """An instance launched by hand into the run's subnet, the NAT gateway and its Elastic IP carry no run tag;
    the guard's schedule carries none at all: all of them still bill or act, so the audit lists them."""
    run = make_run(aws, "run-a", nodes=0, lustre=False)
    untagged = aws.ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1, SubnetId=run.subnet_id)["Instances"][0]
    allocation = aws.ec2.allocate_address(Domain="vpc")["AllocationId"]
    gateway = aws.ec2.create_nat_gateway(SubnetId=run.subnet_id, AllocationId=allocation)["NatGateway"]["NatGatewayId"]
    scheduler = aws.session.client("scheduler")
    scheduler.create_schedule(
        Name="mlinfra-expire-run-a",
        ScheduleExpression="at(2026-03-02T10:00:00)",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={"Arn": "arn:aws:lambda:us-east-1:123456789012:function:mlinfra-guard-run-a", "RoleArn": ROLE},
    )
    other = aws.ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1)["Instances"][0]  # not in the run's VPC
    found = {(left.kind, left.identifier.rsplit("/", 1)[-1], left.found_by) for left in audit("run-a", aws.session)}
    assert ("ec2:instance", untagged["InstanceId"], "run-network") in found
    assert ("ec2:natgateway", gateway, "run-network") in found
    assert ("ec2:elastic-ip", allocation, "addresses") in found
    assert ("scheduler:schedule", "mlinfra-expire-run-a", "schedules") in found
    assert other["InstanceId"] not in {ident for _, ident, _ in found}


# --- the confirmers, one kind at a time: present while it exists, gone once deleted --------------


def _vpc(aws) -> str:
    return aws.ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]


def _subnet(aws) -> str:
    return aws.ec2.create_subnet(VpcId=_vpc(aws), CidrBlock="10.1.0.0/24")["Subnet"]["SubnetId"]


def _nat(aws):
    eip = aws.ec2.allocate_address(Domain="vpc")["AllocationId"]
    nat = aws.ec2.create_nat_gateway(SubnetId=_subnet(aws), AllocationId=eip)["NatGateway"]["NatGatewayId"]
    return ec2_arn("natgateway", nat), lambda: aws.ec2.delete_nat_gateway(NatGatewayId=nat)


def _eip(aws):
    eip = aws.ec2.allocate_address(Domain="vpc")["AllocationId"]
    return ec2_arn("elastic-ip", eip), lambda: aws.ec2.release_address(AllocationId=eip)


def _launch_template(aws) -> str:
    return aws.ec2.create_launch_template(
        LaunchTemplateName="nodes", LaunchTemplateData={"ImageId": AMI, "InstanceType": "t3.micro"}
    )["LaunchTemplate"]["LaunchTemplateId"]


def _fleet(aws):
    template = _launch_template(aws)
    fleet = aws.ec2.create_fleet(
        Type="maintain",
        LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {"LaunchTemplateId": template, "Version": "$Latest"}}],
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"},
    )["FleetId"]
    return ec2_arn("fleet", fleet), lambda: aws.ec2.delete_fleets(FleetIds=[fleet], TerminateInstances=True)


def _ec2_simple(kind: str, make: Callable, delete: Callable):
    def build(aws):
        ident = make(aws)
        return ec2_arn(kind, ident), lambda: delete(aws, ident)

    return build


def _vpc_endpoint(aws):
    endpoint = aws.ec2.create_vpc_endpoint(
        VpcId=_vpc(aws), ServiceName=f"com.amazonaws.{REGION}.s3", VpcEndpointType="Gateway"
    )["VpcEndpoint"]["VpcEndpointId"]
    return ec2_arn("vpc-endpoint", endpoint), lambda: aws.ec2.delete_vpc_endpoints(VpcEndpointIds=[endpoint])


def _role(aws):
    arn = aws.iam.create_role(
        RoleName="guard-role",
        AssumeRolePolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": "lambda.amazonaws.com"}}
                ],
            }
        ),
    )["Role"]["Arn"]
    return arn, lambda: aws.iam.delete_role(RoleName="guard-role")


def _function(aws):
    role, _ = _role(aws)
    import io
    import zipfile

    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("handler.py", "def handler(event, context):\n    return None\n")
    arn = aws.lambda_.create_function(
        FunctionName="guard",
        Runtime="python3.12",
        Role=role,
        Handler="handler.handler",
        Code={"ZipFile": code.getvalue()},
    )["FunctionArn"]
    return arn, lambda: aws.lambda_.delete_function(FunctionName="guard")


def _rule(aws):
    events = aws.session.client("events")
    arn = events.put_rule(Name="completion", EventPattern=json.dumps({"source": ["aws.s3"]}))["RuleArn"]
    return arn, lambda: events.delete_rule(Name="completion")


def _log_group(aws):
    aws.logs.create_log_group(logGroupName="/aws/lambda/guard")
    arn = aws.logs.describe_log_groups(logGroupNamePrefix="/aws/lambda/guard")["logGroups"][0]["arn"]
    return arn, lambda: aws.logs.delete_log_group(logGroupName="/aws/lambda/guard")


def _schedule(aws):
    scheduler = aws.session.client("scheduler")
    arn = scheduler.create_schedule(
        Name="expire",
        ScheduleExpression="at(2026-11-21T12:00:00)",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={
            "Arn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:guard",
            "RoleArn": f"arn:aws:iam::{ACCOUNT}:role/scheduler",
        },
    )["ScheduleArn"]
    return arn, lambda: scheduler.delete_schedule(Name="expire")


def _association(aws):
    run = make_run(aws, "run-a", nodes=1)
    association = aws.fsx.describe_data_repository_associations()["Associations"][0]
    return association["ResourceARN"], lambda: aws.set_file_system(run.file_system_id, "DELETED")


MAKERS = {
    "ec2:natgateway": _nat,
    "ec2:elastic-ip": _eip,
    "ec2:fleet": _fleet,
    "ec2:vpc": _ec2_simple("vpc", _vpc, lambda aws, i: aws.ec2.delete_vpc(VpcId=i)),
    "ec2:subnet": _ec2_simple("subnet", _subnet, lambda aws, i: aws.ec2.delete_subnet(SubnetId=i)),
    "ec2:security-group": _ec2_simple(
        "security-group",
        lambda aws: aws.ec2.create_security_group(GroupName="nodes", Description="nodes", VpcId=_vpc(aws))["GroupId"],
        lambda aws, i: aws.ec2.delete_security_group(GroupId=i),
    ),
    "ec2:route-table": _ec2_simple(
        "route-table",
        lambda aws: aws.ec2.create_route_table(VpcId=_vpc(aws))["RouteTable"]["RouteTableId"],
        lambda aws, i: aws.ec2.delete_route_table(RouteTableId=i),
    ),
    "ec2:internet-gateway": _ec2_simple(
        "internet-gateway",
        lambda aws: aws.ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"],
        lambda aws, i: aws.ec2.delete_internet_gateway(InternetGatewayId=i),
    ),
    "ec2:vpc-endpoint": _vpc_endpoint,
    "ec2:launch-template": _ec2_simple(
        "launch-template", _launch_template, lambda aws, i: aws.ec2.delete_launch_template(LaunchTemplateId=i)
    ),
    "fsx:association": _association,
    "lambda:function": _function,
    "events:rule": _rule,
    "logs:log-group": _log_group,
    "iam:role": _role,
    "scheduler:schedule": _schedule,
}


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_each_confirmer_sees_its_resource_until_it_is_gone(aws, kind):
    arn, delete = MAKERS[kind](aws)
    client_for = aws.session.client
    assert presence(kind, arn, client_for) == "present"
    delete()
    assert presence(kind, arn, client_for) == "gone"


def test_every_confirmer_is_tested_but_the_one_the_emulator_lacks():
    assert set(CONFIRMERS) - set(MAKERS) == {"ec2:placement-group"}  # moto has no placement groups


def test_an_association_of_a_file_system_being_deleted_is_being_deleted(aws):
    run = make_run(aws, "run-a", nodes=1)
    arn = aws.fsx.describe_data_repository_associations()["Associations"][0]["ResourceARN"]
    aws.fsx.delete_file_system(FileSystemId=run.file_system_id)
    assert presence("fsx:association", arn, aws.session.client) == "deleting"


def test_a_describe_that_fails_otherwise_counts_as_present(aws):
    vpc = _vpc(aws)
    aws.inject_faults({"Action": "DescribeVpcs", "Code": "UnauthorizedOperation", "Status": 403, "Count": 1})
    assert presence("ec2:vpc", ec2_arn("vpc", vpc), aws.session.client) == "present"
    aws.ec2.delete_vpc(VpcId=vpc)
    assert presence("ec2:vpc", ec2_arn("vpc", vpc), aws.session.client) == "gone"
    assert presence("ec2:carrier-gateway", ec2_arn("carrier-gateway", "cagw-1"), aws.session.client) is None


# --- input -------------------------------------------------------------------------------------


@pytest.mark.parametrize("run_id", ["Run-A", "", "-a", "a-", "a" * 41, "run a", "run_a"])
def test_a_bad_run_id_is_bad_input(run_id):
    with pytest.raises(InputError) as error:
        audit_main(run_id, REGION, as_json=False)
    [problem] = error.value.problems
    assert problem.path == "--run-id" and repr(run_id) in problem.message


def test_no_region_is_bad_input(monkeypatch, tmp_path):
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(InputError) as error:
        audit_main("run-a", None, as_json=False)
    assert error.value.problems[0].path == "--region"


def test_render_leftovers():
    text = render_leftovers(
        [
            Leftover("ec2:volume", "vol-1", "volumes"),
            Leftover("logs:log-group", "/aws/lambda/mlinfra-guard-r", "log-groups"),
        ]
    )
    assert text.splitlines() == [
        "2 resource(s) left:",
        "  ec2:volume      vol-1  (found by volumes)",
        "  logs:log-group  /aws/lambda/mlinfra-guard-r  (found by log-groups)",
    ]
    assert render_leftovers([]) == "nothing left: no resource carries the run's tag"
