"""`run`'s quota pre-flight against the moto server: Service Quotas (ec2 values seeded through the emulator
extension in moto_quotas.py; vpc's "Network interfaces per Region" is moto's own default, 5000, unless seeded) and
EC2's running instances and network interfaces, through the real adapter (AwsQuotas)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from infra.catalog.aws.quotas import vcpu_quota
from infra.cli import main
from infra.core.errors import InputError
from infra.ops.lifecycle.aws.quotas import AwsQuotas
from infra.ops.lifecycle.run import run
from tests.infra.ops.lifecycle.aws_world import AMI, REGION
from tests.infra.ops.lifecycle.recording import (
    RUN_ID,
    FakeClock,
    RecordingCloud,
    RecordingStacks,
    World,
    deployment_marker,
    printed,
    run_world,
    runtime,
)

STACK = "training-demo"  # 4 x p4d.24xlarge (96 vCPUs, 5 interfaces each) in us-east-1
P = ("ec2", "L-417A185B", "Running On-Demand P instances")
ENI = ("vpc", "L-DF5E4CA3", "Network interfaces per Region")
CLEAN_PREVIEW = SimpleNamespace(errors=[])


def quick_world() -> World:
    """A run that deploys and ends at its first poll with _SUCCESS (the check for an ended run id sees none)."""
    world = run_world(markers_after=1, export_states=["succeeded"])
    world.markers[RUN_ID] = deployment_marker("SUCCESS", exit_code=0, checkpoints_exported=True)
    return world


def launch(world: World, **kwargs):
    rt = runtime(FakeClock())
    code = run(
        STACK,
        RecordingStacks(world),
        RecordingCloud(world),
        rt,
        preview_fn=lambda stack, overrides, project: CLEAN_PREVIEW,
        **kwargs,
    )
    return code, printed(rt)


def running(aws, instance_type: str, count: int = 1, **extra) -> None:
    aws.ec2.run_instances(ImageId=AMI, MinCount=count, MaxCount=count, InstanceType=instance_type, **extra)


def test_a_run_over_the_p_vcpu_quota_is_refused_before_anything_is_created(aws):
    aws.set_quota(*P, 400)
    running(aws, "p4d.24xlarge")  # 96 vCPUs of the P family already running in the Region
    world = quick_world()
    with pytest.raises(InputError) as error:
        launch(world, quotas=AwsQuotas(REGION))
    (problem,) = error.value.problems
    assert str(problem) == (
        "mlinfra:training.nodeCount: this run needs 384 vCPUs (4 x p4d.24xlarge at 96 vCPUs each) of quota "
        "'Running On-Demand P instances' (ec2 L-417A185B) in us-east-1, 96 already in use in the Region: 480 in all, "
        "over the quota's 400. Raise the quota with `aws service-quotas request-service-quota-increase --service-code "
        "ec2 --quota-code L-417A185B --desired-value 480 --region us-east-1`, or lower nodeCount (nothing was deployed)"
    )
    assert world.calls == [("exists", STACK)]  # no claim, no expires-at written, no up


def test_running_instances_of_the_family_are_counted_and_others_are_not(aws):
    aws.set_quota(*P, 400)
    running(aws, "t3.micro", 3)  # Standard family: not the P quota
    world = quick_world()
    code, lines = launch(world, quotas=AwsQuotas(REGION))
    assert code == 0, lines
    assert lines[:2] == [
        "quota: quota 'Running On-Demand P instances' (ec2 L-417A185B): 384 of 400 vCPUs (384 for this run: "
        "4 x p4d.24xlarge at 96 vCPUs each; 0 in use)",
        "quota: quota 'Network interfaces per Region' (vpc L-DF5E4CA3): 24 of 5000 network interfaces (21 for this "
        "run: 4 nodes x 5 interfaces each: 1 ENA and 4 EFA, and 1 of the NAT gateway; 3 in use)",
    ]
    assert "up" in world.names()
    running(aws, "p5.4xlarge")  # 16 vCPUs (DescribeInstanceTypes), P family: 400 of 400 still fits
    running(aws, "trn1.2xlarge")  # Trn: its own quota
    assert AwsQuotas(REGION).vcpus_in_use(vcpu_quota("p5.48xlarge")) == 16
    world = quick_world()
    assert launch(world, quotas=AwsQuotas(REGION))[0] == 0
    running(aws, "p5.4xlarge")  # 416 of 400
    with pytest.raises(
        InputError, match=r"384 vCPUs .* 32 already in use in the Region: 416 in all, over the quota's 400"
    ):
        launch(quick_world(), quotas=AwsQuotas(REGION))


def test_spot_instances_of_the_family_are_on_another_quota(aws):
    running(aws, "p5.4xlarge", InstanceMarketOptions={"MarketType": "spot"})  # InstanceLifecycle "spot"
    running(aws, "p5.4xlarge")
    assert AwsQuotas(REGION).vcpus_in_use(vcpu_quota("p4d.24xlarge")) == 16


def test_the_cli_reads_quotas_in_the_stack_files_region_and_none_on_gcp():
    from infra.ops.lifecycle.cli import run_quotas

    assert run_quotas({"aws:region": "eu-west-1", "mlinfra:kind": "training"}).region == "eu-west-1"
    assert run_quotas({"mlinfra:cloud": "gcp", "gcp:region": "us-central1"}) is None


def test_a_run_over_the_network_interface_quota_is_refused(aws):
    aws.set_quota(*P, 1000)
    aws.set_quota(*ENI, 23)
    running(aws, "t3.micro", 3)  # three interfaces exist in the Region: 21 + 3 = 24 of 23
    world = quick_world()
    with pytest.raises(InputError) as error:
        launch(world, quotas=AwsQuotas(REGION))
    (problem,) = error.value.problems
    assert str(problem) == (
        "mlinfra:training.nodeCount: this run needs 21 network interfaces (4 nodes x 5 interfaces each: 1 ENA and "
        "4 EFA, and 1 of the NAT gateway) of quota 'Network interfaces per Region' (vpc L-DF5E4CA3) in us-east-1, "
        "3 already in use in the Region: 24 in all, over the quota's 23. Raise the quota with `aws service-quotas "
        "request-service-quota-increase --service-code vpc --quota-code L-DF5E4CA3 --desired-value 24 --region "
        "us-east-1`, or lower nodeCount (nothing was deployed)"
    )
    assert world.calls == [("exists", STACK)]


def test_access_denied_warns_and_the_run_goes_on(aws):
    aws.inject_faults(
        {
            "Action": "GetServiceQuota",
            "Code": "AccessDeniedException",
            "Status": 400,
            "Count": 2,
            "Message": "User is not authorized to perform: servicequotas:GetServiceQuota",
        }
    )
    world = quick_world()
    code, lines = launch(world, quotas=AwsQuotas(REGION))
    assert code == 0, lines
    assert lines[:2] == [
        "warning: quota 'Running On-Demand P instances' (ec2 L-417A185B) not checked: AWS: AccessDeniedException: "
        "User is not authorized to perform: servicequotas:GetServiceQuota; the run goes on (it needs 384 vCPUs: "
        "4 x p4d.24xlarge at 96 vCPUs each)",
        "warning: quota 'Network interfaces per Region' (vpc L-DF5E4CA3) not checked: AWS: AccessDeniedException: "
        "User is not authorized to perform: servicequotas:GetServiceQuota; the run goes on (it needs 21 network "
        "interfaces: 4 nodes x 5 interfaces each: 1 ENA and 4 EFA, and 1 of the NAT gateway)",
    ]
    assert "up" in world.names()


def test_with_no_applied_value_the_default_is_the_quota(aws):
    """GetServiceQuota answers NoSuchResourceException for a quota with no applied value; AWS's default counts."""
    aws.set_quota(*P, 384, default=True)
    running(aws, "p5.4xlarge")
    with pytest.raises(InputError, match=r"16 already in use in the Region: 400 in all, over the quota's 384\."):
        launch(quick_world(), quotas=AwsQuotas(REGION))


def test_an_ec2_quota_service_quotas_does_not_know_warns(aws):
    """moto, like a Region without the quota, answers NoSuchResourceException to both GetServiceQuota and
    GetAWSDefaultServiceQuota for an ec2 quota nobody seeded: warned, and the run goes on."""
    world = quick_world()
    code, lines = launch(world, quotas=AwsQuotas(REGION))
    assert code == 0, lines
    assert lines[0].startswith(
        "warning: quota 'Running On-Demand P instances' (ec2 L-417A185B) not checked: AWS: NoSuchResourceException: "
    )
    assert lines[1].startswith("quota: quota 'Network interfaces per Region' (vpc L-DF5E4CA3): 21 of 5000 ")


def test_a_failing_count_is_warned_and_taken_as_zero(aws):
    aws.set_quota(*P, 400)
    aws.inject_faults({"Action": "DescribeInstances", "Code": "UnauthorizedOperation", "Status": 403, "Count": 1})
    code, lines = launch(quick_world(), quotas=AwsQuotas(REGION))
    assert code == 0, lines
    denied = "AWS: UnauthorizedOperation: UnauthorizedOperation (injected)"
    assert lines[0] == f"warning: vCPUs in use in us-east-1 not counted: {denied}"
    assert lines[1].endswith("(384 for this run: 4 x p4d.24xlarge at 96 vCPUs each; in use not counted)")


def _cli(monkeypatch, world: World, *flags: str) -> tuple[int, list[str]]:
    """`python -m infra run` with the real quota adapter (on the moto server) and stand-ins for the rest."""
    rt = runtime(FakeClock())
    monkeypatch.setattr("infra.ops.lifecycle.cli._stacks", lambda: RecordingStacks(world))
    monkeypatch.setattr("infra.ops.lifecycle.cli.run_cloud", lambda config: RecordingCloud(world))
    monkeypatch.setattr("infra.ops.lifecycle.cli.terminal_runtime", lambda: rt)
    return main(["run", "--stack", STACK, *flags]), printed(rt)


def test_the_cli_refuses_with_exit_2_and_one_line(aws, monkeypatch, capsys):
    aws.set_quota(*P, 96)
    world = quick_world()
    assert _cli(monkeypatch, world)[0] == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: mlinfra:training.nodeCount: this run needs 384 vCPUs (4 x p4d.24xlarge at 96 ")
    assert "--desired-value 384 --region us-east-1`" in line
    assert world.calls == [("exists", STACK)]


def test_skip_quota_check_skips_it_and_says_so(aws, monkeypatch):
    aws.set_quota(*P, 96)  # would refuse the run
    world = quick_world()
    code, lines = _cli(monkeypatch, world, "--skip-quota-check")
    assert code == 0, lines
    assert lines[0] == "quota: not checked (--skip-quota-check)"
    assert "up" in world.names()
