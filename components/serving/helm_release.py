"""Helm releases of pinned charts (a helper for components; not a component itself)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.serving.charts import Chart


def helm_release(
    resource_name: str,
    chart: Chart,
    values: dict[str, Any],
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource] | None = None,
) -> k8s.helm.v3.Release:
    return k8s.helm.v3.Release(
        resource_name,
        name=chart.release,
        chart=chart.chart,
        version=chart.version,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repository) if chart.repository else None,
        namespace=chart.namespace,
        create_namespace=chart.namespace not in ("kube-system", "default"),
        values=values,
        atomic=True,  # a failed install or upgrade rolls back instead of leaving a half release
        cleanup_on_fail=True,
        max_history=10,
        timeout=900,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on or [])),
    )
