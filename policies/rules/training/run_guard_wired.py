"""The run guard can actually run, for this run: `training-stack-has-run-guard` sees that a rule, a schedule
and a function exist; this rule sees the wiring between them that a broken stack loses silently.

- EventBridge invokes a function only when the function's resource policy allows it: an
  `aws.lambda.Permission` for `lambda:InvokeFunction` by `events.amazonaws.com` with the completion rule as
  source (Lambda developer guide, "Using resource-based policies"; EventBridge rules have no role here).
- EventBridge Scheduler invokes through the schedule's role: that role's policies allow `lambda:InvokeFunction`
  on the function (Scheduler user guide, "Set up the execution role").
- `reservedConcurrentExecutions: 0` throttles every invocation: the guard never runs.
- The guard's environment (`MLINFRA_RUN_ID`, `MLINFRA_REGISTRY_BUCKET`, run_guard/handler.py) names this run
  and the bucket its completion rule watches; another value makes it act on another run, or on nothing.

Values a preview cannot know (an ARN computed by the cloud) are not judged."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.core.shapes import dict_at
from infra.core.tags import RUN_ID
from infra.providers import tokens
from policies.model import Finding, Resource, Stack, StackRule, is_unknown
from policies.readers import event_patterns
from policies.readers.aws import (
    IAM_ROLE,
    IAM_ROLE_POLICY,
    IAM_ROLE_POLICY_ATTACHMENT,
    as_list,
    granted,
    iam_documents,
    number,
    run_tag,
    stack_role,
    statements,
)

NAME = "run-guard-wired"
FUNCTION = tokens.AWS_LAMBDA_FUNCTION
PERMISSION = tokens.AWS_LAMBDA_PERMISSION
EVENT_RULE = tokens.AWS_CLOUDWATCH_EVENT_RULE
EVENT_TARGET = tokens.AWS_CLOUDWATCH_EVENT_TARGET
SCHEDULE = tokens.AWS_SCHEDULER_SCHEDULE
RUN_ID_VAR, BUCKET_VAR = "MLINFRA_RUN_ID", "MLINFRA_REGISTRY_BUCKET"
INVOKE = "lambda:InvokeFunction"


def guard_functions(stack: Stack) -> list[Resource]:
    """Functions whose environment names a run: the guard (and any copy of it)."""
    return [f for f in stack.of_type(FUNCTION) if RUN_ID_VAR in _environment(f)]


def _environment(function: Resource) -> dict:
    return dict_at(dict_at(function.get("environment")).get("variables"))


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    run_id = run_tag(stack, RUN_ID)
    if stack_role(stack) != "training" or run_id is None:
        return []
    findings = []
    for function in guard_functions(stack):
        findings += [Finding(function.urn, f"guard function {function.label} {p}") for p in _function(function, run_id)]
        findings += _bucket(stack, function)
        findings += _completion_permission(stack, function)
        findings += _schedule_role(stack, function)
    return findings


def _function(function: Resource, run_id: str) -> list[str]:
    problems = []
    if number(function.get("reservedConcurrentExecutions")) == 0:
        problems.append(
            "has reservedConcurrentExecutions 0, which throttles every invocation, so the run is never stopped; "
            "remove it"
        )
    named = _environment(function).get(RUN_ID_VAR)
    if isinstance(named, str) and not is_unknown(named) and named != run_id:
        problems.append(
            f"has {RUN_ID_VAR} '{named}', but this stack's run is '{run_id}', so it would stop another run; set it "
            f"to '{run_id}'"
        )
    return problems


def _watched_buckets(stack: Stack, function: Resource) -> set[str]:
    found: set[str] = set()
    for rule in _rules_invoking(stack, function):
        pattern = event_patterns.parse(rule.get("eventPattern")) or {}
        names = dict_at(dict_at(pattern.get("detail")).get("bucket")).get("name")
        found.update(n for n in as_list(names) if isinstance(n, str))
    return found


def _bucket(stack: Stack, function: Resource) -> list[Finding]:
    named = _environment(function).get(BUCKET_VAR)
    watched = _watched_buckets(stack, function)
    if not isinstance(named, str) or is_unknown(named) or not watched or named in watched:
        return []
    return [
        Finding(
            function.urn,
            f"guard function {function.label} has {BUCKET_VAR} '{named}', but its completion rule watches "
            f"{', '.join(sorted(watched))}, so it reads and reports to another registry; set it to the bucket "
            "the rule watches",
        )
    ]


def _rules_invoking(stack: Stack, function: Resource) -> list[Resource]:
    rules = []
    for target in stack.of_type(EVENT_TARGET):
        if function.urn in target.property_dependencies.get("arn", ()):
            rules += [r for r in stack.linked(target, "rule") if r.type == EVENT_RULE]
    return rules


def _completion_permission(stack: Stack, function: Resource) -> list[Finding]:
    findings = []
    for rule in _rules_invoking(stack, function):
        allowed = [
            p
            for p in stack.of_type(PERMISSION)
            if _names(p, "function", function, *_literals(function.get("name"), "", ":function:"))
            and (p.get("principal") == "events.amazonaws.com" or is_unknown(p.get("principal")))
            and (p.get("action") == INVOKE or is_unknown(p.get("action")))
            and _names(p, "sourceArn", rule, *_literals(rule.get("name"), ":rule/"))
        ]
        if not allowed:
            findings.append(
                Finding(
                    rule.urn,
                    f"event rule {rule.label} targets guard function {function.label}, but no {PERMISSION} lets "
                    f"events.amazonaws.com invoke it from this rule, so EventBridge's calls are refused; add one "
                    f"with action '{INVOKE}', principal 'events.amazonaws.com' and sourceArn the rule's ARN",
                )
            )
    return findings


def _names(resource: Resource, prop: str, target: Resource, *literals: str) -> bool:
    """Whether `prop` names `target`: by dependency, by a value the preview cannot know, or by a literal value
    (equal to one of `literals`, or an ARN ending with one that starts with ':')."""
    value = resource.get(prop)
    if target.urn in resource.property_dependencies.get(prop, ()) or is_unknown(value):
        return True
    return isinstance(value, str) and any(
        value == lit or (lit.startswith(":") and value.endswith(lit)) for lit in literals if lit
    )


def _literals(name: Any, *prefixes: str) -> tuple[str, ...]:
    return tuple(prefix + name for prefix in prefixes) if isinstance(name, str) and name else ()


def _schedule_role(stack: Stack, function: Resource) -> list[Finding]:
    findings = []
    for schedule in stack.of_type(SCHEDULE):
        linked = stack.linked(schedule, "target")
        if function not in linked:
            continue
        for role in (r for r in linked if r.type == IAM_ROLE):
            if stack.referring(role, "role", IAM_ROLE_POLICY_ATTACHMENT) or _may_invoke(stack, role, function):
                continue
            findings.append(
                Finding(
                    schedule.urn,
                    f"schedule {schedule.label} invokes guard function {function.label} as role {role.label}, whose "
                    f"policies do not allow {INVOKE} on it, so the expiry never stops the run; give the role "
                    f"{INVOKE} on the function's ARN",
                )
            )
    return findings


def _may_invoke(stack: Stack, role: Resource, function: Resource) -> bool:
    documents = iam_documents(role)
    for policy in stack.referring(role, "role", IAM_ROLE_POLICY):
        if is_unknown(policy.get("policy")):
            return True  # built from values the preview cannot know: not judged
        documents += iam_documents(policy)
    name = function.get("name")
    for _, document in documents:
        for st in statements(document):
            if granted(st, INVOKE) and any(
                r == "*" or (isinstance(name, str) and r.split(":function:", 1)[-1].split(":")[0] == name)
                for r in st.resources
            ):
                return True
    return False


RULE = StackRule(
    NAME,
    "The run guard can run: invoke permissions for its rule and schedule, concurrency, and its run and bucket.",
    "mandatory",
    check,
)
