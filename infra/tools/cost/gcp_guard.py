"""The GCP run guard's own cost: its Cloud Run function (a tick a minute, one instance at most), its Cloud Scheduler
job, its Pub/Sub topic and the source object. Tiny next to the nodes, but billed for as long as the stack exists."""

from __future__ import annotations

import re

from infra.catalog.services import service_price
from infra.core.shapes import dict_at
from infra.providers import tokens
from infra.tools.cost.lines import line, usage
from infra.tools.cost.managed import Priced
from infra.tools.cost.resources import Resources, number
from infra.tools.preview_json import PolicyResource
from infra.training.limits import GCP_GUARD_TICK_SECONDS

# Cloud Run functions' CPU for a memory size when availableCpu is not set (cloud.google.com/functions/docs/configuring/
# memory, 2026-11: 128 MiB 0.083 vCPU, 256 MiB 0.167, 512 MiB 0.333, 1 GiB 0.583, 2 GiB 1).
DEFAULT_CPU = {128: 0.083, 256: 0.167, 512: 0.333, 1024: 0.583, 2048: 1.0}
MIN_BILLED_SECONDS = 0.1  # Cloud Run bills per 100 ms
SCHEDULER_PERIOD_HOURS = 31 * 24  # Cloud Scheduler bills a job per 31 days


def _memory_mib(text: str) -> int | None:
    """256M, 256Mi, 1G, 1Gi as the table's sizes (Google's memory table names them in MB and GB)."""
    match = re.fullmatch(r"(\d+)(M|Mi|G|Gi)", text)
    return int(match[1]) * (1024 if match[2].startswith("G") else 1) if match else None


def function(r: PolicyResource, res: Resources) -> Priced:
    service = dict_at(r.props, "serviceConfig")
    memory = _memory_mib(str(service.get("availableMemory") or "256M")) or 256
    cpu = number(service.get("availableCpu")) or DEFAULT_CPU.get(memory)
    request, vcpu, gib = (
        service_price(k) for k in ("gcp.cloudRun.request", "gcp.cloudRun.vcpuSecond", "gcp.cloudRun.gibSecond")
    )
    keys = (request.key, vcpu.key, gib.key)
    if cpu is None or None in (request.usd, vcpu.usd, gib.usd):
        return [
            line(r, res, "guard", basis="unknown", what="Cloud Run function: no sourced price or CPU", price_keys=keys)
        ]
    per_second = cpu * vcpu.usd + memory / 1024 * gib.usd  # type: ignore[operator]
    ticks = 3600 / GCP_GUARD_TICK_SECONDS
    instances = number(service.get("maxInstanceCount")) or 100
    low = ticks * (request.usd + MIN_BILLED_SECONDS * per_second)  # type: ignore[operator]
    high = ticks * request.usd + instances * 3600 * per_second  # type: ignore[operator]
    what = (
        f"Cloud Run function, {ticks:g} ticks an hour ({memory} MiB, {cpu:g} vCPU): from each billed 100 ms to "
        f"{instances:g} instance(s) busy all hour"
    )
    return [
        line(
            r,
            res,
            "guard",
            basis="hourly",
            low=low,
            high=high,
            what=what,
            unit_prices=tuple(p.per_unit() for p in (request, vcpu, gib)),
            price_keys=keys,
        )
    ]


def scheduler_job(r: PolicyResource, res: Resources) -> Priced:
    price = service_price("gcp.cloudScheduler.job")
    if price.usd is None:
        return [
            line(
                r, res, "guard", basis="unknown", what="Cloud Scheduler job: no sourced price", price_keys=(price.key,)
            )
        ]
    per_hour = price.usd / SCHEDULER_PERIOD_HOURS
    return [
        line(
            r,
            res,
            "guard",
            basis="hourly",
            low=per_hour,
            high=per_hour,
            what=f"Cloud Scheduler job at {price.per_unit()} (31 days; executions are not billed)",
            price_keys=(price.key,),
        )
    ]


def topic(r: PolicyResource, res: Resources) -> Priced:
    return [
        usage(
            r,
            res,
            "guard",
            "Pub/Sub topic: per message throughput (a tick a minute, the markers)",
            "gcp.pubsub.throughput",
        )
    ]


def source_object(r: PolicyResource, res: Resources) -> Priced:
    return [usage(r, res, "guard", "the guard's source (a few KB) in the data bucket", "gcs.standard.storage")]


GCP_GUARD_PRICERS = {
    tokens.GCP_CLOUDFUNCTIONSV2_FUNCTION: function,
    tokens.GCP_CLOUDSCHEDULER_JOB: scheduler_job,
    tokens.GCP_PUBSUB_TOPIC: topic,
    tokens.GCP_STORAGE_BUCKET_OBJECT: source_object,
}
