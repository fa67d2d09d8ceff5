"""A stack's cost for people (text, markdown) and for tools (--json)."""

from __future__ import annotations

from typing import Any

from infra.tools.cost.model import Line, ModelServerCost, StackCost


def usd(value: float) -> str:
    if value == 0:
        return "$0"
    if abs(value) < 0.0001:
        return "<$0.0001"
    return f"${value:,.2f}" if abs(value) >= 1 else f"${value:.4f}"


def _r(value: float) -> float:
    return round(value, 6)


def to_json(cost: StackCost) -> dict[str, Any]:
    low, high = cost.hourly_low, cost.hourly_high
    month = cost.hours_per_month
    doc: dict[str, Any] = {
        "project": cost.project,
        "stack": cost.stack,
        "kind": cost.kind,
        "region": cost.region,
        "currency": "USD",
        "prices": {
            "region": cost.price_region,
            "sources": [{"what": s.what, "source": s.source, "asOf": s.as_of} for s in cost.sources],
        },
        "hourly": {
            "totalUsd": _r(high) if low == high else None,
            "minUsd": _r(low),
            "maxUsd": _r(high),
            "complete": cost.complete,
            "byGroup": {g: {"minUsd": _r(lo), "maxUsd": _r(hi)} for g, (lo, hi) in cost.by_group().items()},
        },
        "monthly": {"hours": month, "minUsd": _r(low * month), "maxUsd": _r(high * month)},
        "lines": [_line_json(line) for line in cost.lines],
        "noCharge": [{"type": t, "count": n, "why": why} for t, n, why in cost.no_charge],
        "notes": list(cost.notes),
    }
    if cost.model_servers:
        doc["modelServers"] = [_server_json(s) for s in cost.model_servers]
    if cost.hours is not None and cost.run is None:
        doc["period"] = {"hours": cost.hours, "minUsd": _r(low * cost.hours), "maxUsd": _r(high * cost.hours)}
    if cost.run is not None:
        run, idle = cost.run, cost.run.idle
        doc["run"] = {
            "hours": run.hours,
            "hoursFrom": run.hours_from,
            "runningUsd": _r(run.running_usd),
            "perRunUsd": _r(run.per_run_usd),
            "idleTailUsd": _r(idle.usd),
            "totalUsd": _r(run.usd),
            "idleTail": {
                "terms": [{"what": t.what, "seconds": t.seconds, "usd": _r(t.usd), "why": t.why} for t in idle.terms],
                "guardPathWorstUsd": _r(idle.guard_path_usd),
                "hardCapOverrunUsd": _r(idle.hard_cap_overrun_usd),
                "unattendedUntilExpiryUsd": _r(idle.unattended_usd),
                "unattendedWhat": idle.unattended_what,
            },
        }
    return doc


def _line_json(line: Line) -> dict[str, Any]:
    return {
        "resource": line.resource,
        "type": line.type,
        "component": line.component,
        "group": line.group,
        "basis": line.basis,
        "what": line.what,
        "minUsdPerHour": _r(line.low),
        "maxUsdPerHour": _r(line.high),
        "perRunUsd": _r(line.per_run),
        "unitPrices": list(line.unit_prices),
    }


def _per_hour(line: Line) -> str:
    if line.basis == "hourly":
        return usd(line.high) if line.low == line.high else f"{usd(line.low)}-{usd(line.high)}"
    if line.basis == "per-run":
        return f"{usd(line.per_run)}/run"
    return line.basis


def _how(line: Line) -> str:
    extra = f"; plus {', '.join(line.unit_prices)}" if line.unit_prices and line.basis == "hourly" else ""
    usage = f": {', '.join(line.unit_prices)}" if line.unit_prices and line.basis == "usage" else ""
    if line.unit_prices and line.basis == "per-run":
        usage = f"; at {', '.join(line.unit_prices)}"
    return line.what + extra + usage


def _server_json(server: ModelServerCost) -> dict[str, Any]:
    e = server.economics
    if e is None:
        return {"model": server.model, "unknown": server.why_unknown}
    return {
        "model": server.model,
        "instanceType": e.instance_type,
        "device": e.device,
        "devicesPerReplica": e.devices,
        "precision": e.precision,
        "batch": e.batch,
        "tpotMs": round(e.tpot_seconds * 1000, 2),
        "outputTokensPerSecondPerReplica": round(e.tokens_per_second, 1),
        "usdPerHourPerReplica": _r(e.usd_per_hour),
        "usdPerMillionOutputTokens": _r(e.usd_per_million_tokens),
        "replicas": {"min": server.replicas[0], "max": server.replicas[1]},
        "basis": e.basis,
    }


def server_lines(cost: StackCost) -> list[str]:
    """Each model server: $ per million output tokens at the predicted throughput, next to its $/hour."""
    out = []
    for s in cost.model_servers:
        e, (low, high) = s.economics, s.replicas
        if e is None:
            out.append(f"{s.model}: unknown ({s.why_unknown})")
            continue
        out.append(
            f"{s.model}: {e.devices} x {e.device} ({e.instance_type}) at {e.precision}, {usd(e.usd_per_hour)}/h per "
            f"replica, {e.tokens_per_second:,.0f} output tok/s per replica (batch {e.batch}, TPOT "
            f"{e.tpot_seconds * 1000:.1f} ms: {e.basis}) = {usd(e.usd_per_million_tokens)} per million output "
            f"tokens; {low}-{high} replicas {usd(e.usd_per_hour * low)}-{usd(e.usd_per_hour * high)}/h"
        )
    return out


SERVER_HEADING = (
    "Model servers, $ per million output tokens at the predicted throughput (steady decoding at that batch: a floor "
    "of the cost per token; docs/cost.md):"
)


def summary(cost: StackCost) -> list[str]:
    """The headline figures, one per line (shared by text and markdown)."""
    low, high = cost.hourly_low, cost.hourly_high
    at_least = "" if cost.complete else "at least "
    groups = ", ".join(f"{g} {usd(hi)}" for g, (_, hi) in cost.by_group().items())
    month = cost.hours_per_month
    if low == high:
        out = [f"Hourly total: {at_least}{usd(high)} ({groups})"]
        if cost.run is None:
            out.append(f"Monthly ({month} h): {at_least}{usd(high * month)}")
    else:
        out = [
            f"Hourly: {at_least}{usd(low)} at min to {usd(high)} at max ({groups} at max)",
            f"Monthly ({month} h): {at_least}{usd(low * month)} at min to {usd(high * month)} at max",
        ]
    if cost.hours is not None and cost.run is None:
        out.append(f"{cost.hours:g} h: {usd(low * cost.hours)} at min to {usd(high * cost.hours)} at max")
    if cost.run is not None:
        run = cost.run
        out.append(
            f"Run of {run.hours:g} h ({run.hours_from}): {at_least}{usd(run.usd)} = {usd(run.running_usd)} running "
            f"+ {usd(run.per_run_usd)} per-run items + {usd(run.idle.usd)} idle tail"
        )
    return out


def idle_lines(cost: StackCost) -> list[str]:
    if cost.run is None:
        return []
    idle = cost.run.idle
    out = [f"{t.what}: {t.seconds:g} s, {usd(t.usd)} ({t.why})" for t in idle.terms]
    out += [
        f"{idle.guard_path_what}: {usd(idle.guard_path_usd)} of compute",
        f"a run that reaches expires-at overruns it by at most the hard cap's margin: {usd(idle.hard_cap_overrun_usd)} "
        "of compute",
        f"{idle.unattended_what}: {usd(idle.unattended_usd)}",
    ]
    return out


def render(cost: StackCost) -> str:
    out = [
        f"Cost of {cost.project}/{cost.stack} ({cost.kind}, {cost.region or 'no region'}), USD, "
        f"{cost.price_region} list prices",
        "",
    ]
    rows = [("group", "resource", "per hour", "how")]
    rows += [(line.group, line.resource, _per_hour(line), _how(line)) for line in cost.lines]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    out += [
        "  " + "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)) + "  " + row[3] for row in rows
    ]
    out += ["", *summary(cost)]
    if cost.model_servers:
        out += ["", SERVER_HEADING, *(f"  {line}" for line in server_lines(cost))]
    idle = idle_lines(cost)
    if idle:
        out += ["", "Idle tail after the job ends (infra/training/limits.py):", *(f"  {line}" for line in idle)]
    if cost.no_charge:
        out += [
            "",
            "No charge of their own: " + ", ".join(f"{n} x {t.rsplit(':', 1)[-1]}" for t, n, _ in cost.no_charge),
        ]
    out += ["", "Prices:", *(f"  {s.what}: {s.source} (as of {s.as_of})" for s in cost.sources)]
    if cost.notes:
        out += ["", "Notes:", *(f"  {note}" for note in cost.notes)]
    return "\n".join(out)


def markdown(cost: StackCost) -> str:
    """The cost section of a pull-request comment."""
    out = [*(f"- {line}" for line in summary(cost)), ""]
    out += ["| group | resource | per hour | how |", "|---|---|---|---|"]
    out += [f"| {line.group} | `{line.resource}` | {_per_hour(line)} | {_md(_how(line))} |" for line in cost.lines]
    if cost.model_servers:
        out += ["", SERVER_HEADING, "", *(f"- {_md(line)}" for line in server_lines(cost))]
    idle = idle_lines(cost)
    if idle:
        out += ["", "Idle tail after the job ends (`infra/training/limits.py`):", *(f"- {_md(line)}" for line in idle)]
    if cost.no_charge:
        out += [
            "",
            "No charge of their own: " + ", ".join(f"{n} x `{t.rsplit(':', 1)[-1]}`" for t, n, _ in cost.no_charge),
        ]
    if cost.notes:
        out += ["", *(f"> {note}" for note in cost.notes)]
    out += [
        "",
        "<details><summary>Price sources</summary>",
        "",
        *(f"- `{s.what}`: {_md(s.source)} (as of {s.as_of})" for s in cost.sources),
        "",
        "</details>",
    ]
    return "\n".join(out)


def _md(text: str) -> str:
    return text.replace("|", "\\|")
