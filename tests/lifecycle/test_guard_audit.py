"""`audit --run-id R` against the moto server: leaked run resources are found, a clean account is clean."""
from __future__ import annotations

import json

import pytest

from infra.errors import InputError
from infra.lifecycle.audit import audit, audit_main, render_leftovers
from infra.lifecycle.ports import Leftover
from tests.lifecycle.aws_world import REGION, make_run, run_tags


def short_id(identifier: str) -> str:
    """vol-1 from its ARN, a log group's name from its ARN."""
    if ":log-group:" in identifier:
        return identifier.split(":log-group:", 1)[1]
    return identifier.rsplit("/", 1)[-1]


def tear_down(aws, run) -> None:
    """What a teardown that worked does: nodes terminated, file system, subnet and VPC deleted."""
    aws.ec2.terminate_instances(InstanceIds=run.instance_ids)
    if run.file_system_id:
        aws.fsx.delete_file_system(FileSystemId=run.file_system_id, LustreConfiguration={"SkipFinalBackup": True})
    aws.ec2.delete_subnet(SubnetId=run.subnet_id)
    aws.ec2.delete_vpc(VpcId=run.vpc_id)


def leak(aws, run_id: str) -> dict[str, str]:
    """A run torn down except for what typically survives: an interface, a volume, the guard's log group,
    a final backup."""
    run = make_run(aws, run_id)
    tags = run_tags(run_id)
    backup = aws.fsx.create_backup(FileSystemId=run.file_system_id, Tags=tags)["Backup"]["BackupId"]
    aws.ec2.terminate_instances(InstanceIds=run.instance_ids)
    aws.fsx.delete_file_system(FileSystemId=run.file_system_id, LustreConfiguration={"SkipFinalBackup": True})
    eni = aws.ec2.create_network_interface(SubnetId=run.subnet_id, TagSpecifications=[
        {"ResourceType": "network-interface", "Tags": tags}])["NetworkInterface"]["NetworkInterfaceId"]
    untagged_eni = aws.ec2.create_network_interface(SubnetId=run.subnet_id)["NetworkInterface"]["NetworkInterfaceId"]
    volume = aws.ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=8, TagSpecifications=[
        {"ResourceType": "volume", "Tags": tags}])["VolumeId"]
    log_group = f"/aws/lambda/mlinfra-guard-{run_id}"
    aws.logs.create_log_group(logGroupName=log_group)  # Lambda creates it untagged
    return {"backup": backup, "eni": eni, "untagged_eni": untagged_eni, "volume": volume, "log_group": log_group,
            "vpc": run.vpc_id, "subnet": run.subnet_id}


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
    assert {ident for kind, ident in found if kind == "ec2:network-interface"} == {leaked["eni"], leaked["untagged_eni"]}, \
        "the terminated nodes' own interfaces go with them"
    assert not any(kind in ("ec2:instance", "fsx:file-system") for kind, _ in found), "terminated/deleted count as gone"
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
    assert {"kind": "ec2:volume", "identifier": f"arn:aws:ec2:{REGION}:123456789012:volume/{leaked['volume']}",
            "found_by": "tagging-api+volumes"} in document["leftovers"]


def test_audit_of_a_torn_down_run_is_clean(aws, capsys):
    tear_down(aws, make_run(aws, "run-a"))
    make_run(aws, "run-b")  # another run still going
    aws.logs.create_log_group(logGroupName="/aws/lambda/mlinfra-guard-run-b")
    assert audit("run-a", aws.session) == []
    assert audit_main("run-a", REGION, as_json=False) == 0
    assert "nothing left" in capsys.readouterr().out


def test_a_running_node_is_a_leftover(aws):
    run = make_run(aws, "run-a", nodes=1, lustre=False)
    kinds = {(left.kind, left.found_by) for left in audit("run-a", aws.session)}
    assert ("ec2:instance", "tagging-api+instances") in kinds
    assert run.instance_ids[0] in render_leftovers(audit("run-a", aws.session))


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
    text = render_leftovers([Leftover("ec2:volume", "vol-1", "volumes"),
                             Leftover("logs:log-group", "/aws/lambda/mlinfra-guard-r", "log-groups")])
    assert text.splitlines() == ["2 resource(s) left:",
                                 "  ec2:volume      vol-1  (found by volumes)",
                                 "  logs:log-group  /aws/lambda/mlinfra-guard-r  (found by log-groups)"]
    assert render_leftovers([]) == "nothing left: no resource carries the run's tag"
