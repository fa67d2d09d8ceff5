"""Lifecycle rules: the run guard of every training stack, its role scoped to the run, and the registry's
events that feed it. The compliant stacks pass; each broken field or link gives its exact message."""

import json
from dataclasses import replace

import pytest

from policies.model import UNKNOWN, Finding
from policies.readers import event_patterns
from policies.readers.event_patterns import ANY, matches, s3_object_created
from policies.rules.registry import registry_bucket_sends_events_to_eventbridge
from policies.rules.training import guard_role_scoped_to_run, training_stack_has_run_guard
from tests.policies.policy_fixtures import (
    EVENT_RULE,
    EVENT_TARGET,
    EXPIRES,
    NOTIFICATION,
    ROLE,
    ROLE_POLICY,
    SCHEDULE,
    changed,
    completion_pattern,
    guard_policy,
    registry_resources,
    res,
    serving_resources,
    stack_of,
    training_resources,
    training_tags,
    urn,
    without,
)

TRAINING = training_resources()
REGISTRY = registry_resources()
T = "training-demo"
RULE_URN = urn(T, EVENT_RULE, "guard-completion")
SCHEDULE_URN = urn(T, SCHEDULE, "guard-expiry")
AT = f"at({EXPIRES[:-1]})"


def run(module, resources):
    return module.RULE.check(stack_of(resources), module.RULE.defaults())


@pytest.mark.parametrize(
    "module",
    [training_stack_has_run_guard, guard_role_scoped_to_run, registry_bucket_sends_events_to_eventbridge],
    ids=lambda m: m.NAME,
)
def test_compliant_stacks_pass(module):
    for resources in (TRAINING, REGISTRY, serving_resources()):
        assert run(module, resources) == []


# --- training-stack-has-run-guard ----------------------------------------------------------------


def guard(resources):
    return run(training_stack_has_run_guard, resources)


def pattern(key_test):
    document = completion_pattern()
    document["detail"]["object"]["key"] = key_test
    return json.dumps(document)


FIX_RULE = (
    "match S3 'Object Created' events whose detail.object.key is runs/run-1/_SUCCESS or runs/run-1/_FAILED "
    '(e.g. {"prefix": "runs/run-1/_"})'
)


def test_a_stack_without_the_guard():
    bare = [r for r in TRAINING if not r.name.startswith("guard")]
    assert guard(bare) == [
        Finding(
            "",
            "the training stack has no run guard function (aws:lambda/function:Function); add the run guard: "
            "a function that terminates the run's instances, invoked by an EventBridge rule on the run's "
            "completion markers and by a schedule at its expires-at",
        ),
        Finding(
            "",
            f"no EventBridge rule watches the run's completion markers; add an {EVENT_RULE} that matches S3 "
            "'Object Created' events whose detail.object.key is runs/run-1/_SUCCESS or runs/run-1/_FAILED (e.g. "
            '{"prefix": "runs/run-1/_"}) and invokes the guard function',
        ),
        Finding(
            "",
            f"no EventBridge Scheduler schedule stops the run at its expiry; add an {SCHEDULE} with "
            f"scheduleExpression '{AT}', scheduleExpressionTimezone 'UTC' and flexibleTimeWindow mode 'OFF', "
            "targeting the guard function",
        ),
    ]


def test_the_function_is_what_rule_and_schedule_invoke():
    assert guard(without(TRAINING, "guard")) == [
        Finding(
            "",
            "the training stack has no run guard function (aws:lambda/function:Function); add the run guard: "
            "a function that terminates the run's instances, invoked by an EventBridge rule on the run's "
            "completion markers and by a schedule at its expires-at",
        ),
        Finding(
            RULE_URN,
            f"event rule 'guard-completion' invokes no function of this stack; add an {EVENT_TARGET} "
            "with rule set to it and arn the guard function's ARN",
        ),
        Finding(
            SCHEDULE_URN,
            "schedule 'guard-expiry' invokes no function of this stack; set target.arn to the guard function's ARN",
        ),
    ]
    assert guard(without(TRAINING, "guard-completion-target")) == [
        Finding(
            RULE_URN,
            (
                f"event rule 'guard-completion' invokes no function of this stack; add an {EVENT_TARGET} with "
                f"rule set to it "
                "and arn the guard function's ARN"
            ),
        )
    ]


@pytest.mark.parametrize(
    "key_test",
    [
        [{"prefix": "runs/run-1/_"}],
        [{"prefix": "runs/run-1/"}],
        [{"wildcard": "runs/run-1/_*"}],
        ["runs/run-1/_SUCCESS", {"prefix": "runs/run-1/_F"}],
    ],
)
def test_patterns_that_match_exactly_this_runs_markers(key_test):
    assert guard(changed(TRAINING, "guard-completion", "eventPattern", pattern(key_test))) == []


@pytest.mark.parametrize(
    "key_test, message",
    [
        (["runs/run-1/_SUCCESS"], f"event rule 'guard-completion' does not match runs/run-1/_FAILED; {FIX_RULE}"),
        (
            ["checkpoints/run-1/_SUCCESS"],
            f"event rule 'guard-completion' does not match runs/run-1/_SUCCESS or runs/run-1/_FAILED; {FIX_RULE}",
        ),
        (
            [{"prefix": "runs/"}],
            "event rule 'guard-completion' also matches runs/run-10/_SUCCESS, another run's marker, so "
            "another run's end would stop this one; match runs/run-1/ only (a prefix that ends with '/')",
        ),
        (
            [{"prefix": "runs/run-1"}],
            "event rule 'guard-completion' also matches runs/run-10/_SUCCESS, another run's "
            "marker, so another run's end would stop this one; match runs/run-1/ only (a prefix "
            "that ends with '/')",
        ),
        (
            [{"suffix": "_SUCCESS"}, {"suffix": "_FAILED"}],
            "event rule 'guard-completion' also matches runs/run-10/_SUCCESS, another run's marker, so "
            "another run's end "
            "would stop this one; match runs/run-1/ only (a prefix that ends with '/')",
        ),
    ],
)
def test_patterns_that_miss_a_marker_or_catch_other_runs(key_test, message):
    assert guard(changed(TRAINING, "guard-completion", "eventPattern", pattern(key_test))) == [
        Finding(RULE_URN, message)
    ]


def test_other_s3_rules_beside_the_guards_are_not_judged():
    exported = res(
        EVENT_RULE,
        "checkpoint-exported",
        {"tags": training_tags(), "eventPattern": pattern([{"prefix": "checkpoints/run-1/"}])},
    )
    assert guard(TRAINING + [exported]) == []
    partial = changed(TRAINING, "guard-completion", "eventPattern", pattern(["runs/run-1/_SUCCESS"]))
    assert guard(partial + [exported]) == [
        Finding(RULE_URN, f"event rule 'guard-completion' does not match runs/run-1/_FAILED; {FIX_RULE}"),
        Finding(
            urn(T, EVENT_RULE, "checkpoint-exported"),
            f"event rule 'checkpoint-exported' does not match runs/run-1/_SUCCESS or runs/run-1/_FAILED; {FIX_RULE}",
        ),
    ]


def test_object_deleted_events_are_not_completion():
    deleted = completion_pattern()
    deleted["detail-type"] = ["Object Deleted"]
    assert guard(changed(TRAINING, "guard-completion", "eventPattern", json.dumps(deleted)))[0] == Finding(
        "",
        (
            f"no EventBridge rule watches the run's completion markers; add an {EVENT_RULE} that matches S3 'Object "
            'Created\' events whose detail.object.key is runs/run-1/_SUCCESS or runs/run-1/_FAILED (e.g. {"prefix": '
            '"runs/run-1/_"}) and invokes the guard function'
        ),
    )


@pytest.mark.parametrize(
    "path, value, message",
    [
        (
            "eventBusName",
            "training",
            "event rule 'guard-completion' is on event bus 'training', but S3 sends its events to "
            "the default bus; remove eventBusName",
        ),
        ("state", "DISABLED", "event rule 'guard-completion' is disabled; set state 'ENABLED'"),
    ],
)
def test_completion_rule_delivery(path, value, message):
    assert guard(changed(TRAINING, "guard-completion", path, value)) == [Finding(RULE_URN, message)]
    assert guard(changed(TRAINING, "guard-completion", "eventBusName", "default")) == []


@pytest.mark.parametrize(
    "path, value, message",
    [
        (
            "scheduleExpression",
            "at(2020-01-01T00:00:00)",
            f"schedule 'guard-expiry' has scheduleExpression 'at(2020-01-01T00:00:00)', but the run expires at "
            f"{EXPIRES} "
            f"(mlinfra:expires-at); give the guard a schedule with scheduleExpression '{AT}', "
            f"scheduleExpressionTimezone "
            "'UTC' and flexibleTimeWindow mode 'OFF', targeting the guard function",
        ),
        (
            "scheduleExpression",
            "rate(1 hour)",
            f"schedule 'guard-expiry' has scheduleExpression 'rate(1 hour)', but the run expires at {EXPIRES} "
            f"(mlinfra:expires-at); give the guard a schedule with scheduleExpression '{AT}', "
            f"scheduleExpressionTimezone "
            "'UTC' and flexibleTimeWindow mode 'OFF', targeting the guard function",
        ),
        (
            "scheduleExpressionTimezone",
            "Europe/Berlin",
            f"schedule 'guard-expiry' reads {AT} in Europe/Berlin, but mlinfra:expires-at is UTC; set "
            "scheduleExpressionTimezone 'UTC'",
        ),
        (
            "flexibleTimeWindow",
            {"mode": "FLEXIBLE", "maximumWindowInMinutes": 15},
            "schedule 'guard-expiry' has flexibleTimeWindow mode 'FLEXIBLE', so it may fire up to 15 minutes "
            "after the run's "
            "expiry; set mode 'OFF'",
        ),
        (
            "flexibleTimeWindow",
            {"mode": "FLEXIBLE", "maximumWindowInMinutes": 15.0},
            "schedule 'guard-expiry' has flexibleTimeWindow mode 'FLEXIBLE', so it may fire up to 15 minutes "
            "after the run's "
            "expiry; set mode 'OFF'",
        ),
        (
            "flexibleTimeWindow",
            {},
            "schedule 'guard-expiry' sets no flexibleTimeWindow mode; set flexibleTimeWindow mode 'OFF' so it "
            "fires at the "
            "run's expiry",
        ),
        ("state", "DISABLED", "schedule 'guard-expiry' is disabled; set state 'ENABLED'"),
    ],
)
def test_expiry_schedule(path, value, message):
    assert guard(changed(TRAINING, "guard-expiry", path, value)) == [Finding(SCHEDULE_URN, message)]


def test_other_schedules_may_sit_beside_the_expiry_one():
    grace = res(
        SCHEDULE,
        "guard-grace",
        {
            "scheduleExpression": "at(2020-01-01T00:00:00)",
            "flexibleTimeWindow": {"mode": "OFF"},
            "target": {"arn": "a", "roleArn": "r"},
        },
    )
    assert guard(TRAINING + [grace]) == []
    assert (
        guard(changed(TRAINING, "guard-expiry", "scheduleExpressionTimezone", delete=True)) == []
    )  # UTC is the default


def test_unknown_values_and_missing_links_are_not_judged():
    assert guard(changed(TRAINING, "guard-completion", "eventPattern", UNKNOWN)) == []
    assert guard(changed(TRAINING, "guard-expiry", "scheduleExpression", UNKNOWN)) == []
    # documents without per-property dependencies: the plain dependency lists link target, rule and function
    flat = [replace(r, property_dependencies={}) for r in TRAINING]
    assert guard(flat) == []
    # documents without any dependencies cannot show what invokes what
    assert guard([replace(r, property_dependencies={}, dependencies=()) for r in TRAINING]) == []


def test_only_training_stacks_need_a_guard():
    assert guard(REGISTRY) == [] and guard(serving_resources()) == []


# --- guard-role-scoped-to-run --------------------------------------------------------------------

POLICY_URN = urn(T, ROLE_POLICY, "guard-policy")
FIX_SCOPE = (
    'add Condition StringEquals {"aws:ResourceTag/mlinfra:run-id": "run-1"} so it acts only on this run\'s resources'
)
UNSCOPED = f"with no condition on the run's tag, so it reaches every run's resources; {FIX_SCOPE}"


def scope(resources):
    return run(guard_role_scoped_to_run, resources)


def with_statement(index, statement):
    document = guard_policy()
    document["Statement"][index] = statement
    return changed(TRAINING, "guard-policy", "policy", json.dumps(document))


@pytest.mark.parametrize(
    "statement, message",
    [
        (
            {"Sid": "Terminate", "Effect": "Allow", "Action": "ec2:TerminateInstances", "Resource": "*"},
            f"'guard-policy' policy statement Terminate allows ec2:TerminateInstances {UNSCOPED}",
        ),
        (
            {
                "Sid": "Terminate",
                "Effect": "Allow",
                "Action": "ec2:TerminateInstances",
                "Resource": "*",
                "Condition": {"StringEquals": {"aws:ResourceTag/mlinfra:run-id": "run-2"}},
            },
            f"'guard-policy' policy statement Terminate allows ec2:TerminateInstances for mlinfra:run-id "
            f"'run-2', but this run "
            f"is 'run-1'; {FIX_SCOPE}",
        ),
        (
            {
                "Sid": "Terminate",
                "Effect": "Allow",
                "Action": "ec2:TerminateInstances",
                "Resource": "*",
                "Condition": {"StringLike": {"aws:ResourceTag/mlinfra:run-id": "run-*"}},
            },
            f"'guard-policy' policy statement Terminate allows ec2:TerminateInstances {UNSCOPED}",
        ),
        (
            {"Sid": "Terminate", "Effect": "Allow", "Action": ["ec2:*"], "Resource": "*"},
            f"'guard-policy' policy statement Terminate allows ec2:TerminateInstances (through 'ec2:*') {UNSCOPED}",
        ),
        (
            {
                "Sid": "Terminate",
                "Effect": "Allow",
                "Action": "*",
                "Resource": "*",
                "Condition": {"StringEquals": {"aws:ResourceTag/mlinfra:run-id": ["run-1", "run-2"]}},
            },
            "'guard-policy' policy statement Terminate allows ec2:TerminateInstances (through '*'), "
            "fsx:DeleteFileSystem "
            f"(through '*') for mlinfra:run-id 'run-1', 'run-2', but this run is 'run-1'; {FIX_SCOPE}",
        ),
        (
            {"Sid": "Terminate", "Effect": "Allow", "NotAction": "iam:*", "Resource": "*"},
            "'guard-policy' policy statement Terminate allows ec2:TerminateInstances (through 'NotAction'), "
            f"fsx:DeleteFileSystem (through 'NotAction') {UNSCOPED}",
        ),
    ],
)
def test_destructive_statements_are_scoped_to_the_run(statement, message):
    assert scope(with_statement(1, statement)) == [Finding(POLICY_URN, message)]


def test_deny_and_harmless_statements_need_no_scope():
    assert (
        scope(
            with_statement(
                1, {"Sid": "Terminate", "Effect": "Deny", "Action": "ec2:TerminateInstances", "Resource": "*"}
            )
        )
        == []
    )
    assert (
        scope(with_statement(1, {"Sid": "Terminate", "Effect": "Allow", "Action": "ec2:Describe*", "Resource": "*"}))
        == []
    )
    document = guard_policy()
    document["Statement"][2]["Condition"] = {"StringEquals": {"AWS:ResourceTag/mlinfra:run-id": ["run-1"]}}
    assert scope(changed(TRAINING, "guard-policy", "policy", json.dumps(document))) == []  # keys are case-insensitive


def test_inline_role_policies_are_read_too():
    document = {"Statement": [{"Sid": "Cleanup", "Effect": "Allow", "Action": "fsx:DeleteFileSystem", "Resource": "*"}]}
    role = res(
        ROLE,
        "cleanup-role",
        {
            "tags": training_tags(),
            "assumeRolePolicy": "{}",
            "inlinePolicies": [{"name": "cleanup", "policy": json.dumps(document)}],
        },
    )
    assert scope(TRAINING + [role]) == [
        Finding(
            urn(T, ROLE, "cleanup-role"),
            (f"'cleanup-role' inlinePolicies[0] statement Cleanup allows fsx:DeleteFileSystem {UNSCOPED}"),
        )
    ]


# --- registry-bucket-sends-events-to-eventbridge -------------------------------------------------


def test_registry_bucket_sends_events_to_eventbridge():
    message = (
        "registry bucket 'registry-bucket' does not send object events to EventBridge, so run guards never see "
        f"completion markers and runs stop only at expires-at; add an {NOTIFICATION} with eventbridge true "
        "(mlinfra:registry.eventBridge)"
    )
    events = run(registry_bucket_sends_events_to_eventbridge, without(REGISTRY, "registry-events"))
    assert events == [Finding(urn("registry", "aws:s3/bucket:Bucket", "registry-bucket"), message)]
    off = run(registry_bucket_sends_events_to_eventbridge, changed(REGISTRY, "registry-events", "eventbridge", False))
    assert off == [Finding(urn("registry", NOTIFICATION, "registry-events"), message)]
    assert registry_bucket_sends_events_to_eventbridge.RULE.enforcement == "advisory"


# --- EventBridge pattern matching ----------------------------------------------------------------


@pytest.mark.parametrize(
    "test, value, expected",
    [
        (["a"], "a", True),
        (["a"], "b", False),
        ([{"prefix": "runs/"}], "runs/x", True),
        ([{"prefix": {"equals-ignore-case": "RUNS/"}}], "runs/x", True),
        ([{"suffix": ".json"}], "a.json", True),
        ([{"wildcard": "runs/*/_SUCCESS"}], "runs/r/_SUCCESS", True),
        ([{"wildcard": "runs/?/_SUCCESS"}], "runs/r/_SUCCESS", False),  # only * is special
        ([{"anything-but": ["a", "b"]}], "c", True),
        ([{"anything-but": {"prefix": "runs/"}}], "runs/x", False),
        ([{"equals-ignore-case": "OBJECT created"}], "Object Created", True),
        ([{"numeric": [">", 0, "<=", 5]}], 5, True),
        ([{"numeric": [">", 0]}], "5", False),
        ([{"exists": True}], ANY, True),
        ([{"exists": False}], "x", False),
    ],
)
def test_pattern_matchers(test, value, expected):
    assert matches({"field": test}, {"field": value}) is expected


def test_patterns_nest_and_or():
    event = s3_object_created("runs/run-1/_SUCCESS")
    assert matches({"$or": [{"source": ["aws.ec2"]}, {"detail": {"object": {"key": [{"prefix": "runs/"}]}}}]}, event)
    assert not matches({"detail": {"object": {"size": [{"exists": False}]}}}, event)
    assert not matches({"detail": {"missing": {"key": ["x"]}}}, event)
    assert event_patterns.parse("not json") is None and event_patterns.parse(UNKNOWN) is None
