"""The run guard inside the training stack, through the offline preview: the completion rule, the
expiry schedule at expires-at, the function and its run-scoped role, and the lifecycle settings."""

import base64
import gzip
import json
from datetime import UTC, datetime, timedelta

import pytest

from infra.tools.offline.engine import preview
from infra.training.aws import guard
from infra.training.limits import GUARD_RETRY_WINDOW_SECONDS
from tests.helpers import by_type, one, run_cli

RUN = "demo-llama-7b-001"
BUCKET = "mlinfra-registry-123456789012-us-east-1"
# A fixed expiry two days ahead (within the maximum lifetime), on a whole minute.
EXPIRES = (datetime.now(UTC) + timedelta(days=2)).replace(second=0, microsecond=0)
EXPIRES_TEXT = EXPIRES.strftime("%Y-%m-%dT%H:%M:%SZ")
FIXED = [("mlinfra:training.lifecycle.expiresAt", EXPIRES_TEXT)]


@pytest.fixture(scope="module")
def demo():
    return preview("training-demo", FIXED)


def test_completion_rule_matches_only_this_runs_markers(demo):
    rule = one(demo, "aws:cloudwatch/eventRule:EventRule").inputs
    assert json.loads(rule["eventPattern"]) == {
        "source": ["aws.s3"],
        "detail-type": ["Object Created"],
        "detail": {"bucket": {"name": [BUCKET]}, "object": {"key": [f"runs/{RUN}/_SUCCESS", f"runs/{RUN}/_FAILED"]}},
    }
    target = one(demo, "aws:cloudwatch/eventTarget:EventTarget").inputs
    function = one(demo, "aws:lambda/function:Function")
    assert target["arn"] == function.outputs["arn"]
    assert target["retryPolicy"]["maximumEventAgeInSeconds"] == GUARD_RETRY_WINDOW_SECONDS
    permission = one(demo, "aws:lambda/permission:Permission").inputs
    assert (permission["principal"], permission["sourceArn"]) == (
        "events.amazonaws.com",
        one(demo, "aws:cloudwatch/eventRule:EventRule").outputs["arn"],
    )


def test_expiry_schedule_fires_once_at_expires_at(demo):
    schedule = one(demo, "aws:scheduler/schedule:Schedule").inputs
    assert schedule["scheduleExpression"] == f"at({EXPIRES_TEXT[:-1]})"
    assert schedule["scheduleExpressionTimezone"] == "UTC"
    assert schedule["flexibleTimeWindow"] == {"mode": "OFF"}
    assert json.loads(schedule["target"]["input"]) == {"action": "expire"}
    assert schedule["target"]["arn"] == one(demo, "aws:lambda/function:Function").outputs["arn"]
    assert demo.outputs["expiresAt"] == EXPIRES_TEXT
    for step in by_type(demo, "aws:iam/role:Role"):
        assert step.inputs["tags"]["mlinfra:expires-at"] == EXPIRES_TEXT
    scheduler_role = [s for s in by_type(demo, "aws:iam/role:Role") if "scheduler" in s.name][0]
    trust = json.loads(scheduler_role.inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": "123456789012"}}
    guard_role = [s for s in by_type(demo, "aws:iam/role:Role") if s.name.endswith("guard-role")][0]
    trust = json.loads(guard_role.inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "lambda.amazonaws.com"}
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": "123456789012"}}


def test_function_ships_the_guard_source_with_its_settings(demo):
    function = one(demo, "aws:lambda/function:Function")
    inputs = function.inputs
    assert inputs["handler"] == "run_guard.handler.handler" and inputs["runtime"].startswith("python3")
    assert (
        set(inputs["code"]["assets"]) == set(guard.source_files()) >= {"run_guard/handler.py", "run_guard/__init__.py"}
    )
    assert inputs["environment"]["variables"] == {
        "MLINFRA_RUN_ID": RUN,
        "MLINFRA_REGISTRY_BUCKET": BUCKET,
        "MLINFRA_TEARDOWN_ON_COMPLETION": "true",
        "MLINFRA_EXPORT_CHECKPOINTS": "true",
        "MLINFRA_CHECKPOINTS_PATH": "checkpoints",
        "MLINFRA_EXPIRES_AT": EXPIRES_TEXT,  # = the run's mlinfra:expires-at tag: its markers, its instances
    }
    logs = one(demo, "aws:cloudwatch/logGroup:LogGroup")
    assert logs.inputs["name"] == f"/aws/lambda/mlinfra-guard-{RUN}" and logs.inputs["retentionInDays"] > 0
    assert logs.urn in function.dependencies  # created first, so Lambda never makes an unmanaged one


def test_guard_role_acts_only_on_resources_tagged_with_the_run(demo):
    role = [s for s in by_type(demo, "aws:iam/role:Role") if s.name == f"run-{RUN}-guard-role"][0]
    policies = [
        json.loads(s.inputs["policy"])
        for s in by_type(demo, "aws:iam/rolePolicy:RolePolicy")
        if role.urn in s.dependencies
    ]
    assert len(policies) == 2  # its own permissions and the registry's grant on runs/<run-id>/
    statements = [st for doc in policies for st in doc["Statement"]]
    mutating = [
        st for st in statements if any(a in ("ec2:TerminateInstances", "fsx:DeleteFileSystem") for a in _actions(st))
    ]
    assert mutating and all(
        st["Condition"] == {"StringEquals": {"aws:ResourceTag/mlinfra:run-id": RUN}} for st in mutating
    )
    for st in statements:
        if st["Resource"] == "*":
            assert all(a.split(":")[1].startswith("Describe") for a in _actions(st)), st
    writes = [r for st in statements if st["Sid"].startswith("RegistryWrite") for r in st["Resource"]]
    assert writes == [f"arn:aws:s3:::{BUCKET}/runs/{RUN}/*"]
    assert not [a for st in statements for a in _actions(st) if a.startswith("s3:Delete")]


def _actions(statement):
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else actions


def test_nodes_wait_for_the_guard_and_nothing_is_protected(demo):
    nodes = [s for s in demo.steps if s.type == "mlinfra:training:Nodes"][0]
    for token in (
        "aws:scheduler/schedule:Schedule",
        "aws:cloudwatch/eventTarget:EventTarget",
        "aws:lambda/permission:Permission",
    ):
        assert one(demo, token).urn in nodes.dependencies, token  # a run that ends early is still watched
    assert [s.urn for s in demo.resources() if s.protect or s.retain_on_delete] == []


def test_grace_period_reaches_the_nodes(demo):

    script = gzip.decompress(
        base64.b64decode(one(demo, "aws:ec2/launchTemplate:LaunchTemplate").inputs["userData"])
    ).decode()
    stop_at = int(EXPIRES.timestamp()) - 15 * 60  # the default grace period
    assert f"MLINFRA_STOP_AT={stop_at}\n" in script and "MLINFRA_POWER_OFF=1\n" in script


def test_keeping_nodes_and_skipping_export_change_guard_nodes_and_file_system():
    result = preview(
        "training-demo",
        FIXED
        + [
            ("mlinfra:training.lifecycle.teardownOnCompletion", "false"),
            ("mlinfra:training.lifecycle.exportCheckpoints", "false"),
        ],
    )
    variables = one(result, "aws:lambda/function:Function").inputs["environment"]["variables"]
    assert (variables["MLINFRA_TEARDOWN_ON_COMPLETION"], variables["MLINFRA_EXPORT_CHECKPOINTS"]) == ("false", "false")
    links = [
        s.inputs["fileSystemPath"]
        for s in by_type(result, "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")
    ]
    assert links == ["/datasets"]

    script = gzip.decompress(
        base64.b64decode(one(result, "aws:ec2/launchTemplate:LaunchTemplate").inputs["userData"])
    ).decode()
    assert "MLINFRA_POWER_OFF=0\n" in script and "MLINFRA_EXPORT=0\n" in script


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "mlinfra:training.lifecycle.gracePeriodMinutes=121",
            "mlinfra:training.lifecycle.gracePeriodMinutes: must be at most 120 (got 121)",
        ),
        (
            "mlinfra:training.lifecycle.gracePeriodMinutes=60",
            "mlinfra:training.lifecycle.gracePeriodMinutes: 60 minutes is not shorter than ttlHours (1.0 h): "
            "the job would be "
            "asked to stop before it starts; use fewer minutes or a longer ttlHours",
        ),
    ],
)
def test_bad_lifecycle_settings_exit_2_naming_the_field(override, message):
    result = run_cli(
        "preview", "--stack", "training-demo", "-c", override, "-c", "mlinfra:training.lifecycle.ttlHours=1"
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [f"error: {message}"]


def test_failed_guard_invocations_are_kept_and_long_exports_may_continue(demo):
    from infra.training.limits import GUARD_EVENT_MAX_AGE_SECONDS

    invoke = one(demo, "aws:lambda/functionEventInvokeConfig:FunctionEventInvokeConfig").inputs
    queue = one(demo, "aws:sqs/queue:Queue")
    assert invoke["destinationConfig"]["onFailure"]["destination"] == queue.outputs["arn"]
    assert invoke["maximumEventAgeInSeconds"] == GUARD_EVENT_MAX_AGE_SECONDS and invoke["maximumRetryAttempts"] == 2
    assert queue.inputs["tags"]["mlinfra:run-id"] == RUN and queue.inputs["sqsManagedSseEnabled"] is True
    assert one(demo, "aws:lambda/functionRecursionConfig:FunctionRecursionConfig").inputs["recursiveLoop"] == "Allow"
    permissions = [
        json.loads(s.inputs["policy"])
        for s in by_type(demo, "aws:iam/rolePolicy:RolePolicy")
        if s.name == f"run-{RUN}-guard-permissions"
    ][0]
    assert {
        "Sid": "RecordFailures",
        "Effect": "Allow",
        "Action": "sqs:SendMessage",
        "Resource": queue.outputs["arn"],
    } in permissions["Statement"]


def test_everything_that_bills_is_destroyed_before_the_guard(demo):
    guard_children = {s.urn for s in demo.resources() if "mlinfra:training:RunGuard$" in s.urn}
    for component in ("mlinfra:training:RunFileSystem", "mlinfra:training:Network", "mlinfra:training:Nodes"):
        step = [s for s in demo.steps if s.type == component][0]
        assert guard_children & set(step.dependencies), component


def test_nodes_power_themselves_off_after_expiry(demo):
    script = gzip.decompress(
        base64.b64decode(one(demo, "aws:ec2/launchTemplate:LaunchTemplate").inputs["userData"])
    ).decode()
    assert f"MLINFRA_EXPIRES_AT={int(EXPIRES.timestamp())}\n" in script
