"""Every Helm chart mlinfra installs, against the facts of that chart version's own source (values.yaml,
Chart.yaml, ClusterRoles) kept in data/charts/ by extract_chart.py: a values key the chart does not read is
a setting that silently does nothing on a real cluster."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.serving import charts, gateway_charts
from infra.serving.aws import front_door as aws_front_door
from infra.serving.aws.config import AwsModelSpec

DATA = Path(__file__).parent / "data" / "charts"
DEMO_MODEL = AwsModelSpec(name="mistral-7b", version="1.0", accelerator="g5", image="vllm/vllm-openai:v0.33.0")
DEMO_AT_ZERO = AwsModelSpec.model_validate(
    {**DEMO_MODEL.model_dump(by_alias=True, exclude_none=True), "minReplicas": 0, "scaleToZero": {}}
)


def facts(chart: charts.Chart) -> dict[str, Any]:
    name = chart.chart.rsplit("/", 1)[-1]
    path = DATA / f"{name}-{chart.version}.json"
    assert path.exists(), f"no facts for {name} {chart.version}: run tests/contracts/extract_chart.py at its tag"
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def leaves(values: dict[str, Any], whole: set[str], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Dotted paths of the values we set, stopping where the chart takes the rest as it comes."""
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and path not in whole:
            yield from leaves(value, whole, path + ".")
        else:
            yield path, value


def unknown_keys(values: dict[str, Any], chart_facts: dict[str, Any]) -> list[str]:
    keys: dict[str, str] = chart_facts["keys"]
    whole = set(chart_facts["passedWhole"])
    subcharts = set(chart_facts["subcharts"])
    read = set(chart_facts["read"])
    problems = []
    for path, value in leaves(values, whole):
        if path.split(".")[0] in subcharts and path.split(".")[1:] != ["enabled"]:
            continue  # a sub-chart's own values (only `enabled` is the parent's)
        if any(path.startswith(w + ".") for w in whole):
            continue
        if path not in keys and path not in read:
            problems.append(f"{path}: not a key of {chart_facts['chart']} {chart_facts['version']}")
            continue
        expected = keys.get(path, "null")
        ours = {bool: "boolean", int: "number", float: "number", str: "string", list: "list", dict: "map"}[type(value)]
        if expected not in ("null", ours):
            problems.append(f"{path}: the chart's default is a {expected}, ours a {ours} ({value!r})")
    return problems


VALUES: list[tuple[str, Callable[[], charts.Chart], Callable[[], dict[str, Any]]]] = (
    [
        ("nvidia", lambda: charts.NVIDIA_DEVICE_PLUGIN, charts.nvidia_values),
        ("prometheus", lambda: charts.PROMETHEUS, charts.prometheus_values),
        (
            "envoy-gateway",
            lambda: gateway_charts.ENVOY_GATEWAY,
            lambda: gateway_charts.envoy_gateway_values(charts.SYSTEM_NODES),
        ),
        (
            "ai-gateway",
            lambda: gateway_charts.AI_GATEWAY,
            lambda: gateway_charts.ai_gateway_values(charts.SYSTEM_NODES),
        ),
        ("ai-gateway-crds", lambda: gateway_charts.AI_GATEWAY_CRDS, dict),
        (
            "external-secrets",
            lambda: gateway_charts.EXTERNAL_SECRETS,
            lambda: gateway_charts.external_secrets_values(charts.SYSTEM_NODES),
        ),
        (
            "external-secrets-gke",
            lambda: gateway_charts.EXTERNAL_SECRETS,
            lambda: gateway_charts.external_secrets_values(
                charts.SYSTEM_NODES, {"iam.gke.io/gcp-service-account": "secrets@p.iam.gserviceaccount.com"}
            ),
        ),
        (
            "inferencepool",
            lambda: gateway_charts.inference_pool_chart(DEMO_MODEL, "models"),
            lambda: gateway_charts.inference_pool_values(DEMO_MODEL),
        ),
        (
            "inferencepool-zero",
            lambda: gateway_charts.inference_pool_chart(DEMO_AT_ZERO, "models"),
            lambda: gateway_charts.inference_pool_values(DEMO_AT_ZERO),
        ),
        (
            "aws-load-balancer-controller",
            lambda: aws_front_door.LOAD_BALANCER_CONTROLLER,
            lambda: aws_front_door.load_balancer_controller_values(
                "mlinfra-demo", "us-east-1", "vpc-0abc", charts.SYSTEM_NODES
            ),
        ),
    ]
    + [
        (f"keda-k8s-{v}", lambda v=v: charts.keda_chart(v), charts.keda_values)  # type: ignore[misc]
        for v in charts.KUBERNETES_RELEASES
    ]
    + [
        (f"neuron-k8s-{v}", lambda: charts.NEURON, lambda v=v: charts.neuron_values(v))  # type: ignore[misc]
        for v in charts.KUBERNETES_RELEASES
    ]
    + [
        (
            f"cluster-autoscaler-k8s-{v}",
            lambda v=v: charts.cluster_autoscaler_chart(v),  # type: ignore[misc]
            lambda: charts.cluster_autoscaler_values("mlinfra-demo", "us-east-1", {10: [".*"], 20: ["^eks-pool-"]}),
        )
        for v in charts.KUBERNETES_RELEASES
    ]
)


@pytest.mark.parametrize(("label", "chart", "values"), VALUES, ids=[v[0] for v in VALUES])
def test_every_values_key_is_read_by_the_pinned_chart(label, chart, values):
    assert unknown_keys(values(), facts(chart())) == []


def test_an_unknown_or_mistyped_key_is_reported():
    keda = facts(charts.keda_chart("1.33"))
    values = {"operator": {"replicaCount": "2", "replicas": 2}, "nodeSelector": {"any/label": "x"}}
    assert unknown_keys(values, keda) == [
        "operator.replicaCount: the chart's default is a number, ours a string ('2')",
        f"operator.replicas: not a key of keda {keda['version']}",
    ]


KEDA_SUPPORT = json.loads((DATA.parent / "keda_kubernetes_support.json").read_text(encoding="utf-8"))


def minor_of(version: str) -> tuple[int, int]:
    major, minor = version.lstrip("v").split(".")[:2]
    return int(major), int(minor)


@pytest.mark.parametrize("minor", list(charts.KUBERNETES_RELEASES))
def test_keda_chart_is_supported_on_the_clusters_minor(minor):
    # KEDA tests each release on three Kubernetes minors; outside them a 2.16 operator ran on 1.33 unsupported.
    chart_facts = facts(charts.keda_chart(minor))
    keda = "{}.{}".format(*minor_of(chart_facts["appVersion"]))
    assert keda in KEDA_SUPPORT["windows"], f"no recorded window for KEDA {keda}"
    low, high = KEDA_SUPPORT["windows"][keda]
    assert minor_of(low) <= minor_of(minor) <= minor_of(high), f"KEDA {keda} supports {low}-{high}, not {minor}"


def test_gke_keda_is_the_newest_pinned():
    # The release channel moves GKE's minor forward: the widest window ahead is the newest pin's.
    newest = max(charts.KUBERNETES_RELEASES, key=minor_of)
    assert charts.GKE_KUBERNETES_VERSION == newest
    assert all(
        minor_of(charts.keda_chart(newest).version) >= minor_of(charts.keda_chart(v).version)
        for v in charts.KUBERNETES_RELEASES
    )


@pytest.mark.parametrize("minor", list(charts.KUBERNETES_RELEASES))
def test_autoscaler_chart_ships_the_clusters_minor_with_its_rbac(minor):
    chart_facts = facts(charts.cluster_autoscaler_chart(minor))
    assert chart_facts["appVersion"].startswith(f"{minor}."), "the chart's appVersion must be the cluster's minor"
    # 1.32+ lists VolumeAttachments (kubernetes/autoscaler #7663): a chart without the grant never scales.
    assert "volumeattachments" in chart_facts["clusterRoleResources"]
    assert "image" not in charts.cluster_autoscaler_values("c", "us-east-1"), "the chart's own image, never another"


@pytest.mark.parametrize("minor", list(charts.KUBERNETES_RELEASES))
def test_neuron_kube_scheduler_matches_the_cluster_minor(minor):
    # The version-skew policy allows kube-scheduler no newer than the API server and at most one minor
    # older; the chart's default (v1.28.5) is five minors behind a 1.33 cluster.
    custom = charts.neuron_values(minor)["scheduler"]["customScheduler"]["image"]
    assert custom["tag"].startswith(f"v{minor}.") and f"-eks-{minor.replace('.', '-')}-" in custom["tag"]
    assert custom["repository"] == "public.ecr.aws/eks-distro/kubernetes/kube-scheduler"
    default = facts(charts.NEURON)
    assert default["keys"]["scheduler.customScheduler.image.tag"] == "string"


def test_every_fact_file_names_its_source():
    for path in DATA.glob("*.json"):
        chart_facts = json.loads(path.read_text(encoding="utf-8"))
        source = chart_facts["source"]
        assert source["repository"].startswith("https://github.com/") and len(source["commit"]) == 40, path
        assert chart_facts["extracted"] >= "2026-01-01", path
