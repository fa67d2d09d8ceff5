"""A stack's cost from what its preview declares, priced from the catalogs (pure: no I/O beyond the
packaged price tables). Every declared resource is priced, listed as carrying no charge, or reported as
unknown; nothing is dropped silently."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from infra.catalog.aws import price_table_source
from infra.catalog.gcp import machine_table_source
from infra.catalog.gcp import price_table_source as gcp_price_table_source
from infra.catalog.services import hours_per_month, no_charge_reason, service_price, service_price_region
from infra.core import tags as contract
from infra.providers import tokens
from infra.serving.economics import holds_replica, replica_economics
from infra.tools.cost import guard
from infra.tools.cost.compute import COMPUTE_TYPES, compute_lines
from infra.tools.cost.gcp import GCP_PRICERS
from infra.tools.cost.idle import idle_tail
from infra.tools.cost.managed import PRICERS
from infra.tools.cost.model import GROUPS, Line, ModelServerCost, RunCost, Source, StackCost
from infra.tools.cost.resources import Resources
from infra.tools.preview_json import PolicyResource, PreviewDocument


def estimate(document: PreviewDocument, config: Any = None, hours: float | None = None) -> StackCost:
    """`config` is the stack's typed config (infra.kinds.load) when known; `hours` the run's length
    (training; default its lifecycle.ttlHours) or the period to cost (other kinds)."""
    res = Resources(document)
    kind = getattr(config, "kind", None) or _kind_from_tags(res.declared()) or "unknown"
    lines: list[Line] = []
    free: Counter[tuple[str, str]] = Counter()
    for r in res.declared():
        priced = _price(r, res, per_run=kind == "training")
        if isinstance(priced, str):
            free[(r.type, priced)] += 1
        else:
            lines.extend(priced)
    lines.sort(key=lambda line: (GROUPS.index(line.group), line.component, line.resource, line.what))
    gcp = document.config.get("mlinfra:cloud") == "gcp"
    region = str(document.config.get("gcp:region" if gcp else "aws:region") or "")
    price_region = machine_table_source()[2] if gcp else service_price_region()
    cost = StackCost(
        project=document.project,
        stack=document.stack,
        kind=kind,
        region=region,
        price_region=price_region,
        lines=tuple(lines),
        no_charge=tuple((t, n, why) for (t, why), n in sorted(free.items())),
        sources=_sources(lines),
        notes=tuple(_notes(kind, region, lines, price_region)),
        hours_per_month=hours_per_month(),
        hours=hours,
    )
    if kind == "training":
        cost = _with_run(cost, config, hours)
    if kind == "serving" and config is not None:
        cost = replace(cost, model_servers=model_server_costs(config, "gcp" if gcp else "aws"))
    return cost


def model_server_costs(config: Any, cloud: str) -> tuple[ModelServerCost, ...]:
    """$ per million output tokens of each model server, on the first type of its pool."""
    pools = config.serving.node_pools.declared()
    found = []
    for model in config.serving.models:
        pool = pools.get(model.accelerator)
        types = getattr(pool, "instance_types", None) or getattr(pool, "machine_types", None) or []
        holding = [t for t in types if holds_replica(model, cloud, t)]
        economics = replica_economics(model, cloud, holding[0]) if holding else "no type of its pool holds a replica"
        found.append(
            ModelServerCost(
                model.name,
                (model.min_replicas, model.max_replicas),
                economics if not isinstance(economics, str) else None,
                economics if isinstance(economics, str) else "",
            )
        )
    return tuple(found)


def _price(r: PolicyResource, res: Resources, per_run: bool) -> list[Line] | str:
    if not r.custom:
        return []  # components group resources; their children are priced
    if r.type in COMPUTE_TYPES:
        return compute_lines(r, res) or [_unknown(r, res, "instance type or node count not known in the preview")]
    if r.type in PRICERS:
        return PRICERS[r.type](r, res)
    if r.type in GCP_PRICERS:
        return GCP_PRICERS[r.type](r, res)
    if r.type == guard.FUNCTION:
        return guard.function(r, res, per_run)
    if r.type == guard.SCHEDULE:
        return guard.schedule(r, res, per_run)
    reason = no_charge_reason(r.type)
    if reason:
        return reason
    return [
        _unknown(
            r, res, "no price in infra/catalog/data/aws_service_prices.json; add one, or list the type under noCharge"
        )
    ]


def _unknown(r: PolicyResource, res: Resources, why: str) -> Line:
    group = "compute" if r.type in COMPUTE_TYPES else "other"
    return Line(
        resource=r.name,
        type=r.type,
        component=res.component(r),
        group=group,
        basis="unknown",
        what=f"{r.type.rsplit(':', 1)[-1]}: unknown ({why})",
    )


def _kind_from_tags(resources: list[PolicyResource]) -> str | None:
    roles = {r.props.get("tags", {}).get(contract.ROLE) for r in resources if isinstance(r.props.get("tags"), dict)}
    roles.discard(None)
    return roles.pop() if len(roles) == 1 else None


def _sources(lines: list[Line]) -> tuple[Source, ...]:
    sources = []
    if any(line.group == "compute" and line.type in COMPUTE_TYPES for line in lines):
        source, as_of = price_table_source()
        sources.append(Source("EC2 instances, on demand", source, as_of))
    if any(line.type in GCP_PRICERS and line.group == "compute" for line in lines):
        source, as_of = gcp_price_table_source()
        sources.append(Source("GCP machine types, on demand", source, as_of))
    for key in sorted({k for line in lines for k in line.price_keys}):
        price = service_price(key)
        sources.append(Source(key, price.source, price.as_of))
    return tuple(sources)


def _notes(kind: str, region: str, lines: list[Line], price_region: str = "") -> list[str]:
    notes = []
    price_region = price_region or service_price_region()
    if region and region != price_region:
        notes.append(f"prices are {price_region} list prices; this stack is in {region}, where they may differ")
    if any(line.basis == "unknown" for line in lines):
        notes.append("some prices are unknown: the totals are lower bounds")
    if kind == "serving":
        notes.append(
            "min: every node group at its minSize on its cheapest allowed type; max: at its maxSize on its "
            "dearest type (the cluster autoscaler moves between them with load)"
        )
    if kind == "registry" and any(line.type == tokens.GCP_STORAGE_TRANSFER_JOB for line in lines):
        from infra.tools.cost.gcp import mirror_notes

        notes += mirror_notes()
    elif kind == "registry":
        price = service_price("s3.standard.storage")
        notes.append(
            f"registry storage is usage-based: ${price.usd:g} per GB-month ({price.source}); the cost depends "
            "on what is stored, including noncurrent versions until the lifecycle rules expire them"
        )
    return notes


def _with_run(cost: StackCost, config: Any, hours: float | None) -> StackCost:
    lifecycle = getattr(getattr(config, "training", None), "lifecycle", None)
    ttl = float(getattr(lifecycle, "ttl_hours", 24))
    run_hours, hours_from = (hours, "--hours") if hours is not None else (ttl, "lifecycle.ttlHours")
    idle = idle_tail(
        list(cost.lines),
        run_hours,
        ttl,
        teardown_on_completion=getattr(lifecycle, "teardown_on_completion", True),
        export_checkpoints=getattr(lifecycle, "export_checkpoints", True),
    )
    run = RunCost(
        hours=run_hours,
        hours_from=hours_from,
        running_usd=cost.hourly_high * run_hours,
        per_run_usd=sum(line.per_run for line in cost.lines),
        idle=idle,
    )
    return replace(cost, run=run)
