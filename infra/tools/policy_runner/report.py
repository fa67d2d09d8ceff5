"""Policy results for people (grouped by resource) and for tools (--json)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from infra.tools.policy_runner.runner import PolicyRun


def to_json(run: PolicyRun) -> dict[str, Any]:
    return {
        "project": run.project,
        "stack": run.stack,
        "policyPack": {"name": run.pack.name, "version": run.pack.version, "policies": len(run.pack.policies)},
        "resources": run.resources,
        "violations": [
            {
                "policy": v.policy,
                "enforcement": v.enforcement,
                "urn": v.urn,
                "resourceType": v.resource_type,
                "message": v.message,
                "source": v.source,
            }
            for v in run.violations
        ],
        "summary": _counts(run),
    }


def render(run: PolicyRun) -> str:
    lines = [
        f"Policy check of {run.project}/{run.stack}: {run.resources} resources, "
        f"{len(run.pack.policies)} policies (pack {run.pack.name} {run.pack.version})"
    ]
    grouped: dict[str, list] = defaultdict(list)
    for v in run.violations:
        grouped[v.urn].append(v)
    for urn in sorted(grouped, key=lambda u: (u == "", u)):
        first = grouped[urn][0]
        title = f"{urn.rsplit('::', 1)[-1]} ({first.resource_type})" if urn else f"stack {run.stack}"
        lines += ["", f"  {title}"]
        if urn:
            lines.append(f"    {urn}")
        for v in grouped[urn]:
            lines.append(f"    [{v.enforcement}] {v.policy}: {v.message}")
    counts = _counts(run)
    lines += [
        "",
        f"{counts['mandatory']} mandatory, {counts['advisory']} advisory violation(s)"
        + (" - the check fails" if counts["mandatory"] else " - the check passes"),
    ]
    return "\n".join(lines)


def _counts(run: PolicyRun) -> dict[str, int]:
    return {"mandatory": len(run.mandatory), "advisory": sum(1 for v in run.violations if v.enforcement == "advisory")}
