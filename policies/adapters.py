"""From rule records to the policy SDK's policies, and from the SDK's arguments to `Resource` records."""

from __future__ import annotations

import threading
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from policies.model import Resource, ResourceRule, Rule, Stack, StackRule, plain

_LEVELS = {"mandatory": EnforcementLevel.MANDATORY, "advisory": EnforcementLevel.ADVISORY}


def to_policy(rule: Rule) -> ResourceValidationPolicy | StackValidationPolicy:
    if isinstance(rule, ResourceRule):
        return ResourceValidationPolicy(
            name=rule.name,
            description=rule.description,
            enforcement_level=_LEVELS[rule.enforcement],
            validate=_resource_validation(rule),
        )
    schema = (
        PolicyConfigSchema(properties={k: dict(v) for k, v in rule.config_schema.items()})
        if rule.config_schema
        else None
    )
    return StackValidationPolicy(
        name=rule.name,
        description=rule.description,
        enforcement_level=_LEVELS[rule.enforcement],
        validate=_stack_validation(rule),
        config_schema=schema,
    )


def _resource_validation(rule: ResourceRule):
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if not rule.applies_to(args.resource_type):
            return
        for message in rule.check(_resource_of(args)):
            report_violation(message, None)

    return validate


def _stack_validation(rule: StackRule):
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        stack = _stack_of(args.resources)
        config = {**rule.defaults(), **dict(args.get_config() or {})}
        for finding in rule.check(stack, config):
            report_violation(finding.message, finding.urn or None)

    return validate


_last = threading.local()


def _resource_of(args: ResourceValidationArgs) -> Resource:
    """The record of the resource a policy is asked about, built once when every policy of a request gets the same
    decoded properties (the pack's analyzer decodes them once per request; the SDK's own servicer once per policy).
    Rules only read it, as they read the records of a stack that all stack policies share."""
    last = getattr(_last, "resource", None)
    if last is None or last[0] is not args.props:
        resource = Resource(
            type=args.resource_type,
            props=plain(args.props),
            urn=args.urn,
            name=args.name,
            protect=bool(args.opts.protect),
            parent=args.opts.parent or "",
        )
        last = (args.props, resource)
        _last.resource = last
    return last[1]


def _stack_of(resources: list[Any]) -> Stack:
    """The records of a stack's resources, built once when every stack policy of a request gets the same list
    (the pack's analyzer passes one list to all; the SDK's own servicer builds a new one per policy)."""
    last = getattr(_last, "stack", None)
    if last is None or last[0] is not resources:
        last = (resources, Stack(_from_policy_resource(r) for r in resources))
        _last.stack = last
    return last[1]


def _from_policy_resource(r: Any) -> Resource:
    return Resource(
        type=r.resource_type,
        props=plain(r.props),
        urn=r.urn,
        name=r.name,
        protect=bool(r.opts.protect),
        parent=r.parent.urn if r.parent is not None else (r.opts.parent or ""),
        dependencies=tuple(d.urn for d in r.dependencies),
        property_dependencies={k: tuple(d.urn for d in v) for k, v in r.property_dependencies.items()},
    )
