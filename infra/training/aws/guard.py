"""What the run guard is made of, as data (pure, no pulumi): the Lambda's source files, settings and
permissions, the completion-marker event pattern and the expiry schedule. components/training/aws/run_guard.py
only wires these.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infra.core.project import ROOT
from infra.core.tags import RUN_ID
from infra.registry.layout import runs_prefix
from infra.training.bootstrap import CHECKPOINTS_PATH
from infra.training.limits import GUARD_RETRY_WINDOW_SECONDS

SOURCE_DIR = ROOT / "run_guard"  # the Lambda's package, deployed as-is
HANDLER = "run_guard.handler.handler"
RUNTIME = "python3.12"
MARKERS = ("_SUCCESS", "_FAILED")
LOG_RETENTION_DAYS = 30


def function_name(run_id: str) -> str:
    """Fixed (not auto-named) so the log group can be created first, with retention, under its name."""
    return f"mlinfra-guard-{run_id}"


def log_group_name(run_id: str) -> str:
    return f"/aws/lambda/{function_name(run_id)}"


def schedule_name(run_id: str) -> str:
    return f"mlinfra-expire-{run_id}"


def failure_queue_name(run_id: str) -> str:
    return f"mlinfra-guard-failures-{run_id}"


# Named, not auto-named: the component's names (run-<run-id>-guard-completion, ...-scheduler-role) plus Pulumi's
# 8-character suffix outgrow the 64 characters of an EventBridge rule and an IAM role for run ids of 32 to 40
# characters (tests/stacks/test_training_names.py checks every name of the longest run id against its limit).
def completion_rule_name(run_id: str) -> str:
    return f"mlinfra-guard-done-{run_id}"


def scheduler_role_name(run_id: str) -> str:
    return f"mlinfra-guard-sched-{run_id}"


def source_files() -> dict[str, Path]:
    """Archive path -> file, for the Lambda's code: the package's Python files only (no caches)."""
    return {
        f"run_guard/{path.relative_to(SOURCE_DIR).as_posix()}": path
        for path in sorted(SOURCE_DIR.rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def environment(
    run_id: str, bucket: str, teardown_on_completion: bool, export_checkpoints: bool, expires_at: str
) -> dict[str, str]:
    return {
        "MLINFRA_RUN_ID": run_id,
        "MLINFRA_EXPIRES_AT": expires_at,
        "MLINFRA_REGISTRY_BUCKET": bucket,
        "MLINFRA_TEARDOWN_ON_COMPLETION": str(teardown_on_completion).lower(),
        "MLINFRA_EXPORT_CHECKPOINTS": str(export_checkpoints).lower(),
        "MLINFRA_CHECKPOINTS_PATH": CHECKPOINTS_PATH.strip("/"),
    }


def marker_event_pattern(bucket: str, run_id: str) -> dict[str, Any]:
    """S3 "Object Created" events (bucket -> EventBridge) for this run's completion markers only: the
    guard's own reports go to runs/<run-id>/guard/, which this does not match."""
    runs = runs_prefix(run_id)
    return {
        "source": ["aws.s3"],
        "detail-type": ["Object Created"],
        "detail": {"bucket": {"name": [bucket]}, "object": {"key": [runs + marker for marker in MARKERS]}},
    }


def schedule_expression(expires_at: str) -> str:
    """EventBridge Scheduler one-time expression for an ISO-8601 UTC time (2026-11-22T08:00:00Z)."""
    if not expires_at.endswith("Z"):
        raise ValueError(f"expires-at must be UTC with a trailing Z (got {expires_at!r})")
    return f"at({expires_at[:-1]})"


EXPIRE_EVENT = {"action": "expire"}
RETRY_POLICY = {"maximum_event_age_in_seconds": GUARD_RETRY_WINDOW_SECONDS, "maximum_retry_attempts": 8}


def guard_policy(
    partition: str,
    region: str,
    account: str,
    run_id: str,
    function_arn: str,
    log_group_arn: str,
    failure_queue_arn: str,
) -> dict[str, Any]:
    """The guard's own permissions: it can stop, export and delete only what carries this run's tag.
    (Registry writes are granted by the registry: runs/<run-id>/ only.)"""
    arn = f"arn:{partition}:{{service}}:{region}:{account}:{{resource}}"
    run_tag = {"StringEquals": {f"aws:ResourceTag/{RUN_ID}": run_id}}
    return {
        "Version": "2012-10-17",
        "Statement": [
            # Describe calls have no resource-level permissions; they only read.
            {
                "Sid": "FindRunResources",
                "Effect": "Allow",
                "Action": [
                    "ec2:DescribeInstances",
                    "fsx:DescribeFileSystems",
                    "fsx:DescribeDataRepositoryTasks",
                    "fsx:DescribeDataRepositoryAssociations",
                ],
                "Resource": "*",
            },
            {
                "Sid": "TerminateRunInstances",
                "Effect": "Allow",
                "Action": "ec2:TerminateInstances",
                "Resource": arn.format(service="ec2", resource="instance/*"),
                "Condition": run_tag,
            },
            {
                "Sid": "ExportAndDeleteRunFileSystem",
                "Effect": "Allow",
                "Action": ["fsx:CreateDataRepositoryTask", "fsx:DeleteFileSystem"],
                "Resource": arn.format(service="fsx", resource="file-system/*"),
                "Condition": run_tag,
            },
            # FSx runs no export task while automatic export is on: the guard turns it off first.
            {
                "Sid": "StopRunAutomaticExport",
                "Effect": "Allow",
                "Action": "fsx:UpdateDataRepositoryAssociation",
                "Resource": arn.format(service="fsx", resource="association/*"),
                "Condition": run_tag,
            },
            # The export task is a new resource: it must be created carrying the run's tag.
            {
                "Sid": "CreateRunExportTask",
                "Effect": "Allow",
                "Action": ["fsx:CreateDataRepositoryTask", "fsx:TagResource"],
                "Resource": arn.format(service="fsx", resource="task/*"),
                "Condition": {"StringEquals": {f"aws:RequestTag/{RUN_ID}": run_id}},
            },
            # Long exports: the guard hands over to a fresh invocation of itself before its timeout.
            {"Sid": "ContinueItself", "Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": function_arn},
            {
                "Sid": "WriteOwnLogs",
                "Effect": "Allow",
                "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
                "Resource": f"{log_group_arn}:*",
            },
            # Lambda sends failed invocations to the on-failure destination with the function's role.
            {"Sid": "RecordFailures", "Effect": "Allow", "Action": "sqs:SendMessage", "Resource": failure_queue_arn},
        ],
    }


def scheduler_policy(function_arn: str) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "InvokeGuard", "Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": function_arn}
        ],
    }


def trust_policy(service: str, account: str | None = None) -> dict[str, Any]:
    """Trust for an AWS service principal; with `account`, only on behalf of that account (the confused-deputy
    condition EventBridge Scheduler documents, and Lambda's execution-role guide names for the roles Lambda
    assumes). EC2's instance-profile roles take none: EC2 sends no source keys when it assumes them."""
    statement: dict[str, Any] = {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}
    if account:
        statement["Condition"] = {"StringEquals": {"aws:SourceAccount": account}}
    return {"Version": "2012-10-17", "Statement": [statement]}
