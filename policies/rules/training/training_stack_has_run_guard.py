"""Every training stack carries its run guard, so the spend stops even when the machine that started the
run is gone: an EventBridge rule on this run's completion markers (S3 "Object Created" for
runs/<run-id>/_SUCCESS and _FAILED in the registry, and no other run's) and a one-time Scheduler
schedule at the run's `mlinfra:expires-at` (UTC, no flexible window), both invoking the guard's
Lambda function in the stack."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from infra.core.tags import EXPIRES_AT, RUN_ID
from infra.providers import tokens
from policies.model import Finding, Resource, Stack, StackRule, is_unknown
from policies.readers import event_patterns
from policies.readers.aws import number, run_tag, stack_role

NAME = "training-stack-has-run-guard"
EVENT_RULE = tokens.AWS_CLOUDWATCH_EVENT_RULE
EVENT_TARGET = tokens.AWS_CLOUDWATCH_EVENT_TARGET
SCHEDULE = tokens.AWS_SCHEDULER_SCHEDULE
FUNCTION = tokens.AWS_LAMBDA_FUNCTION
MARKERS = ("_SUCCESS", "_FAILED")
_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")
_UTC = (None, "UTC", "Etc/UTC")
ANY_KEY: Any = event_patterns.ANY  # an object key that matches every test: "is this a rule on S3 object events?"


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    run_id = run_tag(stack, RUN_ID)
    if stack_role(stack) != "training" or run_id is None:
        return []  # no run id: training-resources-carry-run-tags reports it
    findings: list[Finding] = []
    if not stack.of_type(FUNCTION):
        findings.append(
            Finding(
                "",
                (
                    "the training stack has no run guard function (aws:lambda/function:Function); add the run guard: a "
                    "function that terminates the run's instances, invoked by an EventBridge rule on the "
                    "run's completion "
                    "markers and by a schedule at its expires-at"
                ),
            )
        )
    findings.extend(_completion_rule(stack, run_id))
    findings.extend(_expiry_schedule(stack, run_tag(stack, EXPIRES_AT)))
    return findings


# --- the completion rule ------------------------------------------------------------------------


def _completion_rule(stack: Stack, run_id: str) -> list[Finding]:
    markers = [f"runs/{run_id}/{m}" for m in MARKERS]
    others = [f"runs/{run_id}0/_SUCCESS", "runs/another-run/_SUCCESS"]
    s3_rules: list[tuple[Resource, dict]] = []
    for rule in stack.of_type(EVENT_RULE):
        if is_unknown(rule.get("eventPattern")):
            return []  # a pattern built from values a preview cannot know: not judged
        pattern = event_patterns.parse(rule.get("eventPattern"))
        if pattern is not None and event_patterns.matches(pattern, event_patterns.s3_object_created(ANY_KEY)):
            s3_rules.append((rule, pattern))
    fix = (
        f"match S3 'Object Created' events whose detail.object.key is {' or '.join(markers)} (e.g. "
        f'{{"prefix": "runs/{run_id}/_"}})'
    )
    if not s3_rules:
        return [
            Finding(
                "",
                f"no EventBridge rule watches the run's completion markers; add an {EVENT_RULE} that "
                f"{fix.replace('match ', 'matches ', 1)} and invokes the guard function",
            )
        ]

    def keys(pattern: dict, candidates: list[str], wanted: bool) -> list[str]:
        return [k for k in candidates if event_patterns.matches(pattern, event_patterns.s3_object_created(k)) == wanted]

    complete = [
        rule for rule, pattern in s3_rules if not keys(pattern, markers, False) and not keys(pattern, others, True)
    ]
    findings = []
    for rule, pattern in s3_rules:
        missed, foreign = keys(pattern, markers, False), keys(pattern, others, True)
        if foreign:
            findings.append(
                Finding(
                    rule.urn,
                    (
                        f"event rule {rule.label} also matches {foreign[0]}, another run's marker, so another "
                        f"run's end would "
                        f"stop this one; match runs/{run_id}/ only (a prefix that ends with '/')"
                    ),
                )
            )
        elif missed and not complete:  # other S3 rules beside a complete one are not the guard's
            findings.append(Finding(rule.urn, f"event rule {rule.label} does not match {' or '.join(missed)}; {fix}"))
    for rule in complete:
        findings.extend(_rule_delivers(stack, rule))
    return findings


def _rule_delivers(stack: Stack, rule: Resource) -> list[Finding]:
    problems = []
    bus = rule.get("eventBusName")
    if isinstance(bus, str) and bus != "default" and not bus.endswith(":event-bus/default"):
        problems.append(
            f"event rule {rule.label} is on event bus '{bus}', but S3 sends its events to the default bus; "
            "remove eventBusName"
        )
    if rule.get("state") == "DISABLED" or rule.get("isEnabled") is False:
        problems.append(f"event rule {rule.label} is disabled; set state 'ENABLED'")
    targets = [t for t in stack.of_type(EVENT_TARGET) if rule.urn in _links(t, "rule")]
    blind = any(not t.dependencies and not t.property_dependencies for t in stack.of_type(EVENT_TARGET))
    if not blind and not any(_invokes_function(stack, t, "arn") for t in targets):
        problems.append(
            f"event rule {rule.label} invokes no function of this stack; add an {EVENT_TARGET} with rule "
            "set to it and arn the guard function's ARN"
        )
    return [Finding(rule.urn, p) for p in problems]


def _links(resource: Resource, prop: str) -> tuple[str, ...]:
    """URNs `prop` depends on; all the resource's dependencies when the document has no per-property ones
    (documents written without propertyDependencies)."""
    return resource.property_dependencies.get(prop, ()) if resource.property_dependencies else resource.dependencies


def _invokes_function(stack: Stack, resource: Resource, prop: str) -> bool:
    """Whether `prop` links a function of the stack; True when the document carries no links to judge by."""
    if not resource.property_dependencies and not resource.dependencies:
        return True
    return any(getattr(stack.get(u), "type", None) == FUNCTION for u in _links(resource, prop))


# --- the expiry schedule ------------------------------------------------------------------------


def _at(schedule: Resource) -> datetime | None:
    match = _AT.match(str(schedule.get("scheduleExpression") or ""))
    return datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S") if match else None


def _expiry_schedule(stack: Stack, expires_at: str | None) -> list[Finding]:
    schedules = stack.of_type(SCHEDULE)
    try:
        expires = datetime.strptime(expires_at or "", "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        expires = None  # training-expiry-within-max-lifetime reports a bad or missing expiry
    at = f"at({expires:%Y-%m-%dT%H:%M:%S})" if expires else "at(<expires-at, UTC>)"
    fix = (
        f"scheduleExpression '{at}', scheduleExpressionTimezone 'UTC' and flexibleTimeWindow mode 'OFF', "
        "targeting the guard function"
    )
    if not schedules:
        return [
            Finding("", f"no EventBridge Scheduler schedule stops the run at its expiry; add an {SCHEDULE} with {fix}")
        ]
    if expires is None or any(is_unknown(s.get("scheduleExpression")) for s in schedules):
        return []
    on_time = [s for s in schedules if _at(s) == expires]
    if not on_time:
        return [
            Finding(
                s.urn,
                (
                    f"schedule {s.label} has scheduleExpression {s.get('scheduleExpression')!r}, but the run "
                    f"expires at "
                    f"{expires_at} ({EXPIRES_AT}); give the guard a schedule with {fix}"
                ),
            )
            for s in schedules
        ]
    findings = []
    for schedule in on_time:
        zone = schedule.get("scheduleExpressionTimezone")
        if zone not in _UTC and not is_unknown(zone):
            findings.append(
                Finding(
                    schedule.urn,
                    (
                        f"schedule {schedule.label} reads {at} in {zone}, but {EXPIRES_AT} is UTC; set "
                        "scheduleExpressionTimezone 'UTC'"
                    ),
                )
            )
        window = schedule.get("flexibleTimeWindow")
        mode = window.get("mode") if isinstance(window, dict) else None
        if mode is None:
            findings.append(
                Finding(
                    schedule.urn,
                    (
                        f"schedule {schedule.label} sets no flexibleTimeWindow mode; set flexibleTimeWindow "
                        f"mode 'OFF' so it "
                        "fires at the run's expiry"
                    ),
                )
            )
        elif mode != "OFF" and not is_unknown(mode):
            late = number(window.get("maximumWindowInMinutes"))
            findings.append(
                Finding(
                    schedule.urn,
                    (
                        f"schedule {schedule.label} has flexibleTimeWindow mode {mode!r}, so it may fire "
                        f"{f'up to {late} minutes' if late else 'minutes'} after the run's expiry; set mode 'OFF'"
                    ),
                )
            )
        if schedule.get("state") == "DISABLED":
            findings.append(Finding(schedule.urn, f"schedule {schedule.label} is disabled; set state 'ENABLED'"))
        if not _invokes_function(stack, schedule, "target"):
            findings.append(
                Finding(
                    schedule.urn,
                    (
                        f"schedule {schedule.label} invokes no function of this stack; set target.arn to the guard "
                        "function's ARN"
                    ),
                )
            )
    return findings


RULE = StackRule(
    NAME,
    "Training stacks hold a run guard: a rule on the run's completion markers and a schedule at "
    "expires-at, invoking its function.",
    "mandatory",
    check,
)
