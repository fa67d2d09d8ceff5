"""The run guard as data: event pattern, schedule expression, permissions, shipped source."""

import re

import pytest

from infra.training.aws import guard


def _matches(pattern: dict, event: dict) -> bool:
    """EventBridge exact-value matching, enough for the patterns the guard uses."""
    for key, wanted in pattern.items():
        value = event.get(key)
        if isinstance(wanted, dict):
            if not isinstance(value, dict) or not _matches(wanted, value):
                return False
        elif value not in wanted:
            return False
    return True


def _s3_event(bucket: str, key: str) -> dict:
    return {
        "source": "aws.s3",
        "detail-type": "Object Created",
        "detail": {"bucket": {"name": bucket}, "object": {"key": key}},
    }


@pytest.mark.parametrize(
    "key, fires",
    [
        ("runs/r1/_SUCCESS", True),
        ("runs/r1/_FAILED", True),
        ("runs/r1/guard/20261121T101500Z-expire.json", False),  # its own reports must not trigger it again
        ("runs/r10/_SUCCESS", False),
        ("checkpoints/r1/_SUCCESS", False),
    ],
)
def test_completion_pattern_matches_this_runs_markers_only(key, fires):
    assert _matches(guard.marker_event_pattern("bucket-a", "r1"), _s3_event("bucket-a", key)) is fires


def test_completion_pattern_ignores_other_buckets():
    assert not _matches(guard.marker_event_pattern("bucket-a", "r1"), _s3_event("bucket-b", "runs/r1/_SUCCESS"))


def test_schedule_expression_is_a_one_time_utc_at():
    assert guard.schedule_expression("2026-11-22T08:00:00Z") == "at(2026-11-22T08:00:00)"
    with pytest.raises(ValueError, match="UTC with a trailing Z"):
        guard.schedule_expression("2026-11-22T08:00:00+01:00")


def test_names_fit_aws_limits_for_the_longest_run_id():
    run_id = "a" * 40
    assert len(guard.function_name(run_id)) <= 64 and re.fullmatch(r"[A-Za-z0-9_-]+", guard.function_name(run_id))
    assert len(guard.schedule_name(run_id)) <= 64
    assert len(guard.failure_queue_name(run_id)) <= 80  # SQS queue names


def test_policy_scopes_every_change_to_the_run_tag():
    doc = guard.guard_policy(
        "aws-us-gov",
        "us-gov-west-1",
        "123456789012",
        "r1",
        "arn:aws-us-gov:lambda:us-gov-west-1:123456789012:function:mlinfra-guard-r1",
        "arn:aws-us-gov:logs:us-gov-west-1:123456789012:log-group:/aws/lambda/mlinfra-guard-r1",
        "arn:aws-us-gov:sqs:us-gov-west-1:123456789012:mlinfra-guard-failures-r1",
    )
    for statement in doc["Statement"]:
        actions = _actions(statement)
        if statement["Resource"] == "*":
            assert all(":Describe" in a for a in actions)
            continue
        assert "*" not in "".join(actions)
        if any(a in ("ec2:TerminateInstances", "fsx:DeleteFileSystem") for a in actions):
            assert statement["Condition"] == {"StringEquals": {"aws:ResourceTag/mlinfra:run-id": "r1"}}
            assert statement["Resource"].startswith("arn:aws-us-gov:")
    # Registry writes come only from the registry's own grant (runs/<run-id>/), never from here.
    assert not [a for s in doc["Statement"] for a in _actions(s) if a.startswith("s3:")]


def _actions(statement: dict) -> list:
    return statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]


def test_source_is_the_run_guard_package_without_caches():
    files = guard.source_files()
    assert "run_guard/handler.py" in files and all(p.endswith(".py") for p in files)
    assert not [p for p in files if "__pycache__" in p]
    module, function = guard.HANDLER.rsplit(".", 1)
    assert f"{module.replace('.', '/')}.py" in files


def test_the_handler_named_in_the_function_exists():
    import importlib

    module, function = guard.HANDLER.rsplit(".", 1)
    assert callable(getattr(importlib.import_module(module), function))
