"""What the pinned charts render with mlinfra's values, as a real Helm rendered them from each chart's source at
its tag (render_chart.py keeps the objects' relevant fields in data/rendered/): the values of today are the ones
rendered, and the objects carry what the values are for. A key the chart reads only in a branch we do not take
renders nothing, which a values-key check cannot see."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.core.project import load_project, stack_config
from infra.kinds import load
from infra.serving import charts
from infra.serving.families import FAMILIES
from infra.serving.scheduling import POOL_LABEL, taint
from tests.contracts.render_chart import CASES, PRIORITIES, values_digest
from tests.helpers import ROOT

DATA = Path(__file__).parent / "data" / "rendered"
SYSTEM = {POOL_LABEL: "system"}


def rendered(chart: charts.Chart, case: str) -> dict[str, Any]:
    name = chart.chart.rsplit("/", 1)[-1]
    path = DATA / f"{name}-{chart.version}-{case}.json"
    assert path.exists(), f"{chart.chart} {chart.version} not rendered: run tests/contracts/render_chart.py"
    facts: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    assert facts["valuesDigest"] == values_digest(CASES[case][1]()), (
        f"the {case} values changed since {path.name} was rendered: render it again (render_chart.py)"
    )
    return facts


def objects(facts: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {o["name"]: o for o in facts["objects"] if o["kind"] == kind}


@pytest.mark.parametrize("minor", list(charts.KUBERNETES_RELEASES))
def test_keda_runs_two_operators_on_the_system_pool_with_a_budget(minor):
    facts = rendered(charts.keda_chart(minor), "keda")
    deployments = objects(facts, "Deployment")
    assert set(deployments) == {"keda-operator", "keda-operator-metrics-apiserver", "keda-admission-webhooks"}
    for deployment in deployments.values():  # 2.20 reads each component's nodeSelector, falling back to ours
        assert SYSTEM.items() <= deployment["nodeSelector"].items(), deployment["name"]
    assert deployments["keda-operator"]["replicas"] == 2
    assert objects(facts, "PodDisruptionBudget")["keda-operator"]["minAvailable"] == 1


@pytest.mark.parametrize("minor", list(charts.KUBERNETES_RELEASES))
def test_the_autoscaler_gets_every_flag_and_its_priority_configmap(minor):
    facts = rendered(charts.cluster_autoscaler_chart(minor), "cluster-autoscaler")
    (deployment,) = objects(facts, "Deployment").values()
    (container,) = deployment["containers"].values()
    values = CASES["cluster-autoscaler"][1]()
    for flag, value in values["extraArgs"].items():
        assert f"--{flag}={value}" in container["flags"], flag
    assert deployment["nodeSelector"] == SYSTEM
    assert deployment["serviceAccountName"] == charts.AUTOSCALER_SERVICE_ACCOUNT
    # The expander reads its ConfigMap in its own namespace (--namespace), and the Role lets it watch that one.
    configmap = objects(facts, "ConfigMap")["cluster-autoscaler-priority-expander"]
    assert configmap["namespace"] == charts.AUTOSCALER_NAMESPACE
    assert f"--namespace={charts.AUTOSCALER_NAMESPACE}" in container["flags"]
    assert yaml.safe_load(configmap["data"]["priorities"]) == PRIORITIES
    (role,) = objects(facts, "Role").values()
    assert any(
        "configmaps" in rule["resources"]
        and "watch" in rule["verbs"]
        and "cluster-autoscaler-priority-expander" in rule.get("resourceNames", [])
        for rule in role["rules"]
    )


def test_the_neuron_chart_places_each_part_where_we_mean():
    facts = rendered(charts.NEURON, "neuron-1.33")
    plugin = objects(facts, "DaemonSet")["neuron-device-plugin"]
    assert plugin["nodeSelector"] == {"mlinfra.io/accelerator": "inf2"}
    assert {t["key"] for t in plugin["tolerations"]} == {"aws.amazon.com/neuron", "CriticalAddonsOnly"}
    deployments = objects(facts, "Deployment")
    custom = deployments["my-scheduler"]
    assert custom["nodeSelector"] == SYSTEM
    (scheduler,) = custom["containers"].values()
    assert scheduler["image"] == charts.KUBERNETES_RELEASES["1.33"].kube_scheduler_image
    # The extension, placed by the custom scheduler, renders no nodeSelector whatever scheduler.nodeSelector says
    # (the chart reads it with defaultScheduler only); without tolerations it can run on untainted nodes only,
    # which are the system pool's.
    extension = deployments["k8s-neuron-scheduler"]
    assert extension["schedulerName"] == "my-scheduler"
    assert extension["nodeSelector"] == {} and extension["tolerations"] == []
    assert "nodeSelector" not in charts.neuron_values("1.33")["scheduler"]


def admits(affinity: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a node with `labels` meets a pod's required node affinity (In terms only: what the charts render)."""
    required = affinity.get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return True
    return any(
        all(e["operator"] == "In" and labels.get(e["key"]) in e["values"] for e in term["matchExpressions"])
        for term in required["nodeSelectorTerms"]
    )


def demo_pools() -> dict[str, list[str]]:
    config = load(stack_config(load_project(ROOT), "serving-demo"))
    return {name: pool.instance_types for name, pool in config.serving.node_pools.declared().items()}


def test_the_nvidia_plugin_runs_on_every_gpu_node_mlinfra_labels():
    """Our GPU nodes carry nvidia.com/gpu.present (node_pools.py) and no Node Feature Discovery labels: the chart's
    own required affinity must admit them, and its toleration the GPU pools' taint."""
    facts = rendered(charts.NVIDIA_DEVICE_PLUGIN, "nvidia-device-plugin")
    plugin = objects(facts, "DaemonSet")["nvidia-device-plugin"]
    assert plugin["nodeSelector"] == {charts.GPU_PRESENT_LABEL: "true"}
    gpu_families = [name for name, family in FAMILIES.items() if not family.neuron]
    assert {taint(f).toleration()["key"] for f in gpu_families} <= {t["key"] for t in plugin["tolerations"]}
    for pool, types in demo_pools().items():
        if FAMILIES[pool].neuron:
            continue
        for instance_type in types:
            node = {charts.GPU_PRESENT_LABEL: "true", "node.kubernetes.io/instance-type": instance_type}
            assert admits(plugin.get("affinity", {}), node), f"{instance_type}: the plugin's affinity refuses it"
    assert not admits(plugin["affinity"], {"node.kubernetes.io/instance-type": "m6i.large"})  # and nothing else
    # The MPS control daemon renders too, for nodes labelled MPS-capable only (none of ours): it never runs.
    mps = objects(facts, "DaemonSet")["nvidia-device-plugin-mps-control-daemon"]
    assert mps["nodeSelector"].get("nvidia.com/mps.capable") == "true"


def test_the_neuron_plugin_admits_every_neuron_type_the_demo_serves_on():
    """Chart 1.0.0's device plugin requires an instance type from its own list: a serving type missing there (trn2,
    which that chart predates) would get no plugin, and its model pods would stay Pending."""
    plugin = objects(rendered(charts.NEURON, "neuron-1.33"), "DaemonSet")["neuron-device-plugin"]
    for pool, types in demo_pools().items():
        if not FAMILIES[pool].neuron:
            continue
        for instance_type in types:
            node = {"mlinfra.io/accelerator": pool, "node.kubernetes.io/instance-type": instance_type}
            assert admits(plugin["affinity"], node), f"{instance_type}: not in the Neuron chart's instance types"
    assert not admits(plugin["affinity"], {"node.kubernetes.io/instance-type": "trn2.48xlarge"})


def test_every_rendered_fact_names_its_source_and_renderer():
    for path in DATA.glob("*.json"):
        facts = json.loads(path.read_text(encoding="utf-8"))
        assert facts["source"]["repository"].startswith("https://github.com/") and len(facts["source"]["commit"]) == 40
        assert facts["renderedWith"].startswith("Helm v"), path


@pytest.mark.parametrize("case", ["external-secrets", "external-secrets-gke"])
def test_external_secrets_reads_and_writes_secrets_in_the_gateway_s_namespace_only(case):
    """The controller watches the gateway's namespace (its flag) and its Secret rights are a Role there; nothing
    the chart renders may touch Secrets cluster-wide (the certificate controller's ClusterRole would read every
    Secret: the webhook and it are off)."""
    from infra.serving import front_door, gateway_charts

    facts = rendered(gateway_charts.EXTERNAL_SECRETS, case)
    (controller,) = objects(facts, "Deployment").values()
    assert controller["nodeSelector"] == SYSTEM
    assert f"--namespace={front_door.GATEWAY_NAMESPACE}" in controller["containers"]["external-secrets"]["flags"]
    for name, role in objects(facts, "ClusterRole").items():
        assert not [r for r in role["rules"] if "secrets" in r.get("resources", [])], name
    secret_roles = [
        r for r in objects(facts, "Role").values() if any("secrets" in x.get("resources", []) for x in r["rules"])
    ]
    assert [(r["name"], r["namespace"]) for r in secret_roles] == [
        ("external-secrets-controller", front_door.GATEWAY_NAMESPACE)
    ]
    binding = objects(facts, "RoleBinding")["external-secrets-controller"]
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": controller["serviceAccountName"],
            "namespace": gateway_charts.SECRETS_NAMESPACE,
        }
    ]


def test_on_gke_the_controller_s_account_is_the_one_workload_identity_lets_act_as_its_google_account():
    from infra.serving import gateway_charts
    from infra.serving.gcp import gke
    from tests.contracts.render_chart import GKE_ACCOUNT

    facts = rendered(gateway_charts.EXTERNAL_SECRETS, "external-secrets-gke")
    (controller,) = objects(facts, "Deployment").values()
    account = objects(facts, "ServiceAccount")[controller["serviceAccountName"]]
    assert account["annotations"] == GKE_ACCOUNT
    # The member the stack's Workload Identity binding names (components/serving/gcp/secret_reader.py).
    member = gke.workload_member("p", account["namespace"], account["name"])
    assert (
        member == f"serviceAccount:p.svc.id.goog[{gateway_charts.SECRETS_NAMESPACE}/{gateway_charts.SECRETS_ACCOUNT}]"
    )


def test_the_endpoint_picker_carries_the_labels_the_policy_admits_and_the_scraper_keeps():
    """The inferencepool chart v1.5.0 as mlinfra installs it per model: the picker's pod label is what the model
    servers' NetworkPolicy admits, the scrape job keeps its pods and metrics port (read without a token), it is
    given no deprecated metric flag (v1.5.0 exits on one; its vLLM default is the KV metric the pinned engines
    export), fits the system pool, and its pool holds exactly the model's server pods on the server's port."""
    from infra.serving import front_door, gateway_charts, servers
    from infra.serving.manifests import selector
    from tests.contracts.render_chart import PICKED

    facts = rendered(gateway_charts.inference_pool_chart(PICKED, "models"), "inferencepool")
    picker = objects(facts, "Deployment")[gateway_charts.picker_name(PICKED)]
    assert picker["labels"][front_door.PICKER_LABEL] == gateway_charts.picker_name(PICKED)
    keep = charts.PICKER_SCRAPE_JOB["relabel_configs"][0]
    assert keep["source_labels"][0] == "__meta_kubernetes_pod_label_" + "".join(
        c if c.isalnum() else "_" for c in "inference.networking.k8s.io/igw-mode"
    )
    assert picker["labels"]["inference.networking.k8s.io/igw-mode"] + ";metrics" == keep["regex"]
    epp = picker["containers"]["epp"]
    assert "metrics" in epp["ports"] and "--metrics-endpoint-auth=false" in epp["args"]
    assert not [a for a in epp["args"] if "metric" in a and a.startswith("--") and "auth" not in a]
    assert epp["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "4Gi"}}
    assert picker["replicas"] == 1 and picker["tolerations"] == []  # never on the tainted accelerator nodes
    args = epp["args"]
    assert args[args.index("--pool-name") + 1] == front_door.pool_name(PICKED)
    assert args[args.index("--config-file") + 1] == "/config/default-plugins.yaml"
    pool = objects(facts, "InferencePool")[front_door.pool_name(PICKED)]["spec"]
    assert pool["selector"] == {"matchLabels": selector(PICKED)}
    assert pool["targetPorts"] == [{"number": servers.PORT}]
    assert pool["endpointPickerRef"]["name"] == gateway_charts.picker_name(PICKED)
    plugins = objects(facts, "ConfigMap")[gateway_charts.picker_name(PICKED)]["data"]["default-plugins.yaml"]
    assert {"queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer"} <= {
        p["type"] for p in yaml.safe_load(plugins)["plugins"]
    }


def test_envoy_gateway_runs_on_system_nodes_and_calls_ai_gateway_and_the_rate_limiter_where_they_are():
    from infra.serving import front_door, gateway_charts

    facts = rendered(gateway_charts.ENVOY_GATEWAY, "envoy-gateway")
    controller = objects(facts, "Deployment")["envoy-gateway"]
    assert controller["nodeSelector"] == SYSTEM and controller["replicas"] == 2
    assert controller["serviceAccountName"] == front_door.ENVOY_GATEWAY_ACCOUNT  # the InferencePool reader's subject
    config = yaml.safe_load(objects(facts, "ConfigMap")["envoy-gateway-config"]["data"]["envoy-gateway.yaml"])
    assert config["gateway"]["controllerName"] == front_door.CONTROLLER_NAME
    assert config["rateLimit"]["backend"] == {"type": "Redis", "redis": {"url": front_door.REDIS_URL}}
    manager = config["extensionManager"]
    assert {"group": "inference.networking.k8s.io", "kind": "InferencePool", "version": "v1"} in manager[
        "backendResources"
    ]
    ai = rendered(gateway_charts.AI_GATEWAY, "ai-gateway")
    (ai_controller,) = objects(ai, "Deployment").values()
    assert manager["service"]["fqdn"]["hostname"] == (
        f"{ai_controller['name']}.{gateway_charts.AI_GATEWAY_NAMESPACE}.svc.cluster.local"
    )
    assert ai_controller["nodeSelector"] == SYSTEM
    (container,) = ai_controller["containers"].values()
    assert f"--envoyGatewayNamespace={front_door.GATEWAY_NAMESPACE}" in container["flags"]


def test_the_load_balancer_controller_runs_as_the_account_its_role_trusts_with_alb_features_off():
    from infra.serving.aws import front_door as aws_front_door

    facts = rendered(aws_front_door.LOAD_BALANCER_CONTROLLER, "aws-load-balancer-controller")
    (controller,) = objects(facts, "Deployment").values()
    assert controller["serviceAccountName"] == aws_front_door.LOAD_BALANCER_CONTROLLER_ACCOUNT
    assert controller["nodeSelector"] == SYSTEM and controller["replicas"] == 2
    flags = set(controller["containers"]["aws-load-balancer-controller"]["flags"])
    assert {"--cluster-name=mlinfra-demo", "--aws-vpc-id=vpc-0abc", "--aws-region=us-east-1"} <= flags
    assert {"--enable-shield=false", "--enable-waf=false", "--enable-wafv2=false"} <= flags  # their grants dropped


def test_the_picker_of_a_model_at_zero_holds_requests_with_flow_control():
    """A model that scales to zero: its picker reads the flow-control file it is given (a custom file replaces the
    default one whole, so it keeps the default scorers and their weights), which holds each request up to the
    model's hold and at most its queue."""
    from infra.serving import gateway_charts
    from tests.contracts.render_chart import PICKED_AT_ZERO

    facts = rendered(gateway_charts.inference_pool_chart(PICKED_AT_ZERO, "models"), "inferencepool-zero")
    name = gateway_charts.picker_name(PICKED_AT_ZERO)
    args = objects(facts, "Deployment")[name]["containers"]["epp"]["args"]
    config_file = args[args.index("--config-file") + 1].removeprefix("/config/")
    assert config_file.startswith(gateway_charts.FLOW_CONTROL_PREFIX)
    data = objects(facts, "ConfigMap")[name]["data"]
    config = yaml.safe_load(data[config_file])
    assert config["featureGates"] == ["flowControl"]
    zero = PICKED_AT_ZERO.scale_to_zero
    assert config["flowControl"] == {
        "maxRequests": str(zero.max_held_requests),
        "defaultRequestTTL": f"{zero.hold_seconds}s",
    }
    default = yaml.safe_load(data["default-plugins.yaml"])
    scorers = {p["type"] for p in default["plugins"]} - {"metrics-data-source", "core-metrics-extractor"}
    assert {p["type"] for p in config["plugins"]} == scorers
    assert config["schedulingProfiles"] == default["schedulingProfiles"]
