"""Lambda functions and EventBridge Scheduler schedules: per invocation, so in a training stack (the run
guard) they are priced per run from the lifecycle's limits, and elsewhere by their unit prices.

Worst case per run of one function, by design (infra/training/limits.py): every trigger that targets it
(an EventBridge rule's target or a schedule) fires once and is retried GUARD_RETRY_ATTEMPTS times, each
invocation running to its declared timeout; an export the guard polls adds at most EXPORT_WAIT_SECONDS of
running time, in invocations every EXPORT_POLL_SECONDS. Real runs cost far less.
"""

from __future__ import annotations

import math
from typing import Any

from infra.catalog.services import service_price
from infra.providers import tokens
from infra.tools.cost.model import Line
from infra.tools.cost.resources import Resources, number
from infra.tools.preview_json import PolicyResource
from infra.training.limits import EXPORT_POLL_SECONDS, EXPORT_WAIT_SECONDS, GUARD_RETRY_ATTEMPTS

FUNCTION = tokens.AWS_LAMBDA_FUNCTION
SCHEDULE = tokens.AWS_SCHEDULER_SCHEDULE
EVENT_TARGET = tokens.AWS_CLOUDWATCH_EVENT_TARGET
# Lambda's defaults when the function does not declare them.
DEFAULT_MEMORY_MB = 128
DEFAULT_TIMEOUT_SECONDS = 3


def function(r: PolicyResource, res: Resources, per_run: bool) -> list[Line]:
    arch = "arm64" if "arm64" in (r.props.get("architectures") or []) else "x86_64"
    request, duration = service_price("lambda.request"), service_price(f"lambda.duration.{arch}")
    memory_gb = (number(r.props.get("memorySize")) or DEFAULT_MEMORY_MB) / 1024
    timeout = number(r.props.get("timeout")) or DEFAULT_TIMEOUT_SECONDS
    units = (request.per_unit(), duration.per_unit())
    base: dict[str, Any] = dict(
        resource=r.name,
        type=r.type,
        component=res.component(r),
        group="guard",
        unit_prices=units,
        price_keys=(request.key, duration.key),
    )
    if not per_run:
        return [Line(**base, basis="usage", what="Lambda function: per invocation")]
    if request.usd is None or duration.usd is None:
        return [Line(**base, basis="unknown", what="Lambda function: no sourced price for its requests or duration")]
    triggers = max(1, len(res.dependents(r, EVENT_TARGET, SCHEDULE)))
    fired = triggers * (1 + GUARD_RETRY_ATTEMPTS)
    polls = math.ceil(EXPORT_WAIT_SECONDS / EXPORT_POLL_SECONDS)
    invocations = fired + polls
    gb_seconds = memory_gb * (fired * timeout + EXPORT_WAIT_SECONDS)
    usd = invocations * request.usd + gb_seconds * duration.usd
    what = (
        f"Lambda, at most {invocations} invocations per run ({triggers} trigger(s) x {1 + GUARD_RETRY_ATTEMPTS} "
        f"attempts + {polls} export polls) and {gb_seconds:g} GB-s ({memory_gb * 1024:g} MB x "
        f"({fired} x {timeout:g} s timeout + {EXPORT_WAIT_SECONDS} s export wait)): negligible per hour"
    )
    return [Line(**base, basis="per-run", what=what, per_run=usd)]


def schedule(r: PolicyResource, res: Resources, per_run: bool) -> list[Line]:
    price = service_price("scheduler.invocation")
    base: dict[str, Any] = dict(
        resource=r.name,
        type=r.type,
        component=res.component(r),
        group="guard",
        unit_prices=(price.per_unit(),),
        price_keys=(price.key,),
    )
    one_time = str(r.props.get("scheduleExpression", "")).startswith("at(")
    if not (per_run and one_time):
        return [Line(**base, basis="usage", what="EventBridge Scheduler schedule: per invocation")]
    if price.usd is None:
        return [Line(**base, basis="unknown", what="EventBridge Scheduler schedule: no sourced price per invocation")]
    return [
        Line(
            **base,
            basis="per-run",
            per_run=price.usd,
            what="one-time EventBridge Scheduler schedule: 1 invocation per run, negligible per hour",
        )
    ]
