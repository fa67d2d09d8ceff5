"""Pure serving logic: model server manifests (schema-validated), autoscaler, node pools, charts, IAM, EKS plans."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.serving import charts, engine, manifests, servers
from infra.serving.aws import eks, iam, node_pools
from infra.serving.aws.config import G5PoolSpec, Inf2PoolSpec, ModelSpec, NodePoolsSpec, ServingSpec
from tests.k8s_schemas import validate

REGISTRY = manifests.Registry(bucket="mlinfra-registry-123456789012-us-east-1", region="us-east-1")
INF2 = ModelSpec.model_validate({"name": "llama", "version": "1.0", "accelerator": "inf2", "image": "neuron-vllm:1"})
G5 = ModelSpec.model_validate(
    {
        "name": "mistral",
        "version": "2.0",
        "accelerator": "g5",
        "image": "vllm/vllm-openai:v0.33.0",
        "acceleratorsPerReplica": 1,
        "autoscaling": {"scaleDownStabilizationSeconds": 600},
    }
)


def pod(model: ModelSpec) -> dict:
    return manifests.deployment(model, "models", REGISTRY)["spec"]["template"]["spec"]


@pytest.mark.parametrize("model", [INF2, G5], ids=["inf2", "g5"])
def test_every_object_validates_against_its_schema(model):
    objects = manifests.model_server_objects(model, "models", REGISTRY)
    assert [o["kind"] for o in objects] == [
        "ServiceAccount",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "ScaledObject",
    ]
    for manifest in objects:
        validate(manifest)
    validate(manifests.namespace("models"))


def test_schema_validation_catches_a_misspelt_field():
    broken = manifests.deployment(G5, "models", REGISTRY)
    broken["spec"]["template"]["spec"]["tolerationz"] = []
    with pytest.raises(Exception, match="tolerationz"):
        validate(broken)
    scaler = manifests.scaled_object(G5, "models")
    scaler["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"][
        "stabilizationWindowSeconds"
    ] = 7200
    with pytest.raises(Exception, match="7200"):
        validate(scaler)


def test_accelerator_requests_tolerations_and_placement():
    inf2, g5 = pod(INF2), pod(G5)
    assert inf2["containers"][0]["resources"]["requests"]["aws.amazon.com/neuron"] == "1"
    assert inf2["containers"][0]["resources"]["limits"]["aws.amazon.com/neuron"] == "1"
    assert g5["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert inf2["tolerations"] == [{"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"}]
    assert g5["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert inf2["nodeSelector"] == {"mlinfra.io/accelerator": "inf2"} and g5["nodeSelector"] == {
        "mlinfra.io/accelerator": "g5"
    }
    assert inf2["schedulerName"] == "my-scheduler" and "schedulerName" not in g5
    assert {c["topologyKey"] for c in g5["topologySpreadConstraints"]} == {
        "topology.kubernetes.io/zone",
        "kubernetes.io/hostname",
        "eks.amazonaws.com/capacityType",  # a Spot pool's on-demand baseline holds one replica
    }


def test_probes_and_disruption_budget():
    container = pod(G5)["containers"][0]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}
    # Startup allows 15 minutes of weight loading before liveness may restart the pod.
    assert container["startupProbe"]["periodSeconds"] * container["startupProbe"]["failureThreshold"] == 900
    pdb = manifests.pod_disruption_budget(G5, "models")
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": manifests.selector(G5)}}
    assert manifests.service(G5, "models")["spec"]["selector"] == manifests.selector(G5)


def test_artefacts_come_from_the_models_prefix_of_the_matching_variant():
    assert manifests.artefact_prefix(INF2) == "models/llama/1.0/neuron/"
    assert manifests.artefact_prefix(G5) == "models/mistral/2.0/cuda/"
    g5_args = pod(G5)["containers"][0]["args"]
    assert g5_args[:2] == ["--model", "s3://mlinfra-registry-123456789012-us-east-1/models/mistral/2.0/cuda/"]
    assert "runai_streamer" in g5_args
    inf2 = pod(INF2)
    [fetch] = inf2["initContainers"]
    source = "s3://mlinfra-registry-123456789012-us-east-1/models/llama/1.0/neuron/"
    shape = {"tensor_parallel_size": 2, "max_num_seqs": 8, "max_model_len": 4096, "dtype": "bfloat16"}
    assert fetch["command"] == servers.fetch_command(source, shape)  # the server's own compiled shape
    assert fetch["command"][-1].endswith(f"exec aws s3 sync --only-show-errors {source} /models\n")
    assert inf2["containers"][0]["args"][:2] == ["--model", "/models"]
    # g5 streams from S3 and fetches nothing first: one step only checks the artefact before the server starts.
    [check] = pod(G5)["initContainers"]
    assert check["name"] == "check-model"
    assert check["command"] == servers.check_command(
        "s3://mlinfra-registry-123456789012-us-east-1/models/mistral/2.0/cuda/"
    )


@pytest.mark.parametrize(
    "keys, code, said",
    [
        (["manifest.json", "model.safetensors"], 0, "SYNC"),
        (["manifest.json", "model.safetensors", "_FAILED"], 1, "refusing s3://b/models/m/v1/cuda/: marked _FAILED"),
        (
            ["model.safetensors", "conversion.json"],
            1,
            "refusing s3://b/models/m/v1/cuda/: no manifest.json (promotion failed or unfinished)",
        ),
        ([], 1, "no manifest.json"),
        (["sub/manifest.json", "manifest.json.tmp", "old_FAILED"], 1, "no manifest.json"),
    ],
    ids=["served", "failed", "unfinished", "empty", "look-alikes"],
)
def test_the_model_servers_refuse_a_failed_or_unfinished_artefact(tmp_path, keys, code, said):
    """The rendered fetch command, run by /bin/sh with a stand-in `aws` answering the listing."""
    import subprocess

    listing = "\t".join(f"models/m/v1/cuda/{k}" for k in keys) or "None"
    (tmp_path / "aws").write_text(
        "#!/bin/sh\n"
        f"case \"$1 $2\" in 's3api list-objects-v2') printf '%s\\n' '{listing}';;\n"
        "  's3 sync') echo SYNC;; *) exit 9;; esac\n",
        encoding="utf-8",
    )
    (tmp_path / "aws").chmod(0o755)
    for command, fetches in (
        (servers.fetch_command("s3://b/models/m/v1/cuda/"), True),
        (servers.check_command("s3://b/models/m/v1/cuda/"), False),
    ):
        done = subprocess.run(command, capture_output=True, text=True, env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
        assert done.returncode == code, done.stderr
        if code:
            assert said in done.stderr and done.stdout == ""  # refused before any copy
        else:
            assert done.stdout == ("SYNC\n" if fetches else "")


SHAPE = {"tensor_parallel_size": 2, "max_num_seqs": 8, "max_model_len": 8192, "dtype": "bfloat16"}


@pytest.mark.parametrize(
    ("recorded", "code"),
    [
        ({**SHAPE, "override_neuron_config": {"save_sharded_checkpoint": True}}, 0),
        ({**SHAPE, "max_model_len": 4096}, 1),
    ],
    ids=["the servers-shape", "compiled-for-4096"],
)
def test_the_neuron_server_refuses_an_artefact_compiled_for_another_shape(tmp_path, recorded, code):
    """The rendered fetch command, run by /bin/sh with the real jq and a stand-in `aws` serving a manifest: an
    artefact whose recorded engine is not the server's compiled shape is refused, both shapes named, before the
    copy; the same shape (other settings aside) is fetched."""
    import json
    import subprocess

    (tmp_path / "manifest.json").write_text(json.dumps({"variant": "neuron", "engine": recorded}), encoding="utf-8")
    (tmp_path / "aws").write_text(
        "#!/bin/sh\n"
        "case \"$1 $2\" in 's3api list-objects-v2') printf '%s\\n' 'models/m/v1/neuron/manifest.json';;\n"
        f"  's3 cp') cp {tmp_path}/manifest.json \"$5\";; 's3 sync') echo SYNC;; *) exit 9;; esac\n",
        encoding="utf-8",
    )
    (tmp_path / "aws").chmod(0o755)
    models = tmp_path / "models"
    models.mkdir()
    command = servers.fetch_command("s3://b/models/m/v1/neuron/", SHAPE)
    command[-1] = command[-1].replace(f" {servers.MODEL_DIR}", f" {models}")
    done = subprocess.run(command, capture_output=True, text=True, env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert done.returncode == code, done.stderr
    if code:
        assert done.stdout == "" and done.stderr == (
            "refusing s3://b/models/m/v1/neuron/: compiled for tensor_parallel_size=2, max_num_seqs=8, "
            "max_model_len=4096, dtype=bfloat16; this server runs tensor_parallel_size=2, max_num_seqs=8, "
            "max_model_len=8192, dtype=bfloat16 (the compiled shape: promote a version for this one)\n"
        )
    else:
        assert done.stdout == "SYNC\n"


def test_the_neuron_artefact_volume_is_sized_from_the_model_and_scheduled():
    """The local copy of a Neuron artefact is as large as the model's sharded weights and graphs, and requested as
    ephemeral storage so the scheduler places the pod on a node whose disk holds it."""
    sized = {
        None: 100,  # no modelConfig: the default volume
        "stacks/models/llama-3-8b/config.json": 30,  # ~15 GiB of bf16 weights
        "stacks/models/llama-3-70b/config.json": 170,  # ~131.5 GiB
    }
    for config, gib in sized.items():
        model = INF2.model_copy(update={"architecture_config": config})
        spec = pod(model)
        (volume,) = [v for v in spec["volumes"] if v["name"] == "model"]
        assert volume["emptyDir"] == {"sizeLimit": f"{gib}Gi"}
        (server,) = spec["containers"]
        assert server["resources"]["requests"]["ephemeral-storage"] == f"{gib}Gi"
        validate(manifests.deployment(model, "models", REGISTRY))
    # Streaming servers keep nothing on disk: no request to schedule by.
    assert "ephemeral-storage" not in pod(G5)["containers"][0]["resources"]["requests"]


def test_the_autoscaler_may_consolidate_nodes_under_model_servers():
    """cluster-autoscaler (skip-nodes-with-local-storage, default true) keeps any node whose pods have a disk-backed
    emptyDir not named in safe-to-evict-local-volumes; in-memory ones (/dev/shm) never block."""
    for model in (INF2, G5):
        deployment = manifests.deployment(model, "models", REGISTRY)
        spec = deployment["spec"]["template"]["spec"]
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        disk = {v["name"] for v in spec["volumes"] if "emptyDir" in v and v["emptyDir"].get("medium") != "Memory"}
        named = set(annotations.get(manifests.LOCAL_VOLUMES_ANNOTATION, "").split(",")) - {""}
        assert named == disk, model.accelerator
        assert "cluster-autoscaler.kubernetes.io/safe-to-evict" not in annotations


def test_tensor_parallel_degree_counts_neuron_cores():
    big = INF2.model_copy(update={"accelerators_per_replica": 6})
    assert engine.tensor_parallel_size(big) == 12
    assert engine.tensor_parallel_size(G5) == 1


def test_autoscaler_scales_on_queue_depth_and_kv_cache_not_cpu():
    spec = manifests.scaled_object(G5, "models")["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "mistral"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (G5.min_replicas, 4)
    triggers = {t["name"]: t for t in spec["triggers"]}
    assert {t["type"] for t in spec["triggers"]} == {"prometheus"}
    pods = '{namespace="models",app_kubernetes_io_instance="mistral"}[1m]'
    # Smoothed over a minute, 0 (not nothing) before any replica reports: no frozen or jumpy HPA.
    assert triggers["queue-depth"]["metadata"]["query"] == (
        f"sum(avg_over_time(vllm:num_requests_waiting{pods})) or vector(0)"
    )
    assert triggers["queue-depth"]["metadata"]["threshold"] == "4"
    assert triggers["queue-depth"]["metricType"] == "AverageValue"
    # Both names of the KV-cache gauge (renamed in vLLM 0.10), each pod counted once.
    assert triggers["kv-cache"]["metadata"]["query"] == (
        f"(avg(avg_over_time(vllm:kv_cache_usage_perc{pods}) or avg_over_time(vllm:gpu_cache_usage_perc{pods})))"
        " or vector(0)"
    )
    assert triggers["kv-cache"]["metadata"]["threshold"] == "0.8"
    assert all("ignoreNullValues" not in t["metadata"] for t in spec["triggers"])
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] == 600
    assert "cpu" not in json.dumps(spec).lower()


def test_neuron_scales_on_the_share_of_its_compiled_batch_in_use():
    query = manifests.metric_queries(INF2, "models")["kv-cache"]
    assert query == (
        '(avg(avg_over_time(vllm:num_requests_running{namespace="models",app_kubernetes_io_instance="llama"}[1m]))'
        " / 8) or vector(0)"
    )
    bigger = INF2.model_copy(update={"max_num_seqs": 4})
    assert manifests.metric_queries(bigger, "models")["kv-cache"].endswith(" / 4) or vector(0)")


def test_the_autoscaler_alone_owns_the_replica_count():
    for model in (G5, INF2):
        assert "replicas" not in manifests.deployment(model, "models", REGISTRY)["spec"]


def test_the_deployment_carries_the_models_slo_for_tools_reading_a_preview():
    with_slo = ModelSpec.model_validate(
        {**G5.model_dump(by_alias=True, exclude_unset=True), "slo": {"ttftP95Ms": 800, "tpotP95Ms": 50}}
    )
    meta = manifests.deployment(with_slo, "models", REGISTRY)["metadata"]
    assert manifests.slo_from_annotations(meta["annotations"]) == (800.0, 50.0)
    assert "mlinfra.io/slo" not in (manifests.deployment(G5, "models", REGISTRY)["metadata"].get("annotations") or {})


def test_a_stopping_replica_finishes_its_requests():
    pod_spec = pod(G5)
    server = pod_spec["containers"][0]
    assert server["lifecycle"]["preStop"]["exec"]["command"] == servers.drain_command()
    # Endpoint removal, the longest request (maxRequestSeconds, 600 by default), and a margin.
    assert pod_spec["terminationGracePeriodSeconds"] == 15 + 600 + 15
    shorter = G5.model_copy(update={"max_request_seconds": 60})
    assert (
        manifests.deployment(shorter, "models", REGISTRY)["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        == 90
    )


@pytest.mark.parametrize(
    "metrics, waits",
    [
        ('vllm:num_requests_running{model_name="m"} 0.0\nvllm:num_requests_waiting{model_name="m"} 0.0\n', False),
        ('vllm:num_requests_running{model_name="m"} 2.0\nvllm:num_requests_waiting{model_name="m"} 0.0\n', True),
        ('vllm:num_requests_running{model_name="m"} 0.0\nvllm:num_requests_waiting{model_name="m"} 1.0\n', True),
    ],
    ids=["idle", "running", "waiting"],
)
def test_the_drain_waits_while_the_server_has_requests(monkeypatch, metrics, waits):
    """The real preStop program against a metrics endpoint on loopback (the endpoint delay shortened)."""
    import http.server
    import subprocess
    import sys
    import threading

    served = {"calls": 0}

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            served["calls"] += 1
            body = metrics if served["calls"] == 1 else metrics.replace(" 2.0", " 0.0").replace(" 1.0", " 0.0")
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    try:
        program = servers.drain_command()[2]
        program = program.replace(f"time.sleep({servers.ENDPOINT_DRAIN_SECONDS})", "time.sleep(0)")
        program = program.replace(f"127.0.0.1:{servers.PORT}", f"127.0.0.1:{server.server_port}")
        program = program.replace("time.sleep(2)", "time.sleep(0.05)")
        done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        assert served["calls"] == (2 if waits else 1)
    finally:
        server.shutdown()


def test_the_drain_ends_when_the_server_is_gone():
    import subprocess
    import sys

    program = servers.drain_command()[2].replace(f"time.sleep({servers.ENDPOINT_DRAIN_SECONDS})", "")
    program = program.replace(f"127.0.0.1:{servers.PORT}", "127.0.0.1:9")  # nothing listens on discard
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def test_pods_are_scraped_where_the_queries_look():
    template = manifests.deployment(G5, "models", REGISTRY)["spec"]["template"]
    assert template["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert template["metadata"]["annotations"]["prometheus.io/port"] == str(servers.PORT)
    # app.kubernetes.io/instance becomes the app_kubernetes_io_instance label the queries select on.
    assert template["metadata"]["labels"]["app.kubernetes.io/instance"] == "mistral"


models = st.builds(
    lambda name, accelerator, lo, extra, n: ModelSpec.model_validate(
        {
            "name": name,
            "version": "v1",
            "accelerator": accelerator,
            "image": "img:1",
            "minReplicas": lo,
            "maxReplicas": lo + extra,
            "acceleratorsPerReplica": n,
        }
    ),
    st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True),
    st.sampled_from(["inf2", "g5"]),
    st.integers(1, 10),
    st.integers(0, 10),
    st.integers(1, 8),
)


@settings(max_examples=25, deadline=None)
@given(models)
def test_every_valid_model_gives_valid_objects_reading_only_its_prefix(model):
    for manifest in manifests.model_server_objects(model, "models", REGISTRY):
        validate(manifest)
    text = json.dumps(manifests.deployment(model, "models", REGISTRY))
    assert f"s3://{REGISTRY.bucket}/models/{model.name}/v1/{model.artefact_variant}/" in text


def test_node_pool_plans():
    spec = ServingSpec.model_validate(
        {"models": [INF2.model_dump(by_alias=True)], "nodePools": {"g5": {"capacityType": "spot"}}}
    )
    inf2, inf2_large = node_pools.accelerator_plans("inf2", spec.node_pools.inf2)
    g5, *_ = node_pools.accelerator_plans("g5", spec.node_pools.g5)
    assert (
        inf2.taints == (node_pools.Taint("aws.amazon.com/neuron", "true"),)
        and node_pools.EKS_EFFECT[inf2.taints[0].effect] == "NO_SCHEDULE"
    )
    assert g5.taints == (node_pools.Taint("nvidia.com/gpu", "true"),)
    assert (inf2.capacity_type, g5.capacity_type) == ("ON_DEMAND", "SPOT")
    assert (inf2.ami_type, g5.ami_type) == ("AL2023_x86_64_NEURON", "AL2023_x86_64_NVIDIA")
    assert inf2.labels == {"mlinfra.io/accelerator": "inf2", "mlinfra.io/pool": "inf2"}
    assert g5.labels["nvidia.com/gpu.present"] == "true"
    assert inf2.desired_size == inf2.min_size
    # One group per shape: the pool's minimum on its first type, its maximum on each.
    assert (inf2.instance_type, inf2.min_size, inf2.max_size) == ("inf2.xlarge", spec.node_pools.inf2.min_size, 4)
    assert (inf2_large.instance_type, inf2_large.min_size, inf2_large.max_size) == ("inf2.8xlarge", 0, 4)
    assert inf2_large.name == "pool-inf2-8xlarge"
    system, system_large = node_pools.system_plans()
    assert system.taints == () and system.min_size >= 2 and system.labels == {"mlinfra.io/pool": "system"}
    assert system_large.min_size == 0
    assert node_pools.launch_template_metadata()["http_tokens"] == "required"


def test_the_pools_minimum_lands_on_the_smallest_type_that_holds_its_models():
    """The demo's inf2 pool is [inf2.xlarge, inf2.8xlarge] with minSize 1, and its only model's replica (4 CPU,
    24 GiB) needs an inf2.8xlarge: a minimum on the xlarge would run idle (~$550 a month) beside the node the
    replica scales up, and could never be removed."""
    neuron = INF2.model_copy(update={"cpu": 4, "memory_gib": 24})
    pool = Inf2PoolSpec(instance_types=["inf2.xlarge", "inf2.8xlarge"], min_size=1)
    small, large = node_pools.accelerator_plans("inf2", pool, node_pools.replicas_of([neuron, G5], "inf2"))
    assert (small.instance_type, small.min_size, large.instance_type, large.min_size) == (
        "inf2.xlarge",
        0,
        "inf2.8xlarge",
        1,
    )
    light = node_pools.replicas_of([INF2.model_copy(update={"cpu": 2, "memory_gib": 8})], "inf2")
    assert [p.min_size for p in node_pools.accelerator_plans("inf2", pool, light)] == [1, 0]  # the xlarge holds it
    # A Spot pool's on-demand baseline goes with its minimum.
    g5 = G5PoolSpec(instance_types=["g5.xlarge", "g5.2xlarge"], capacity_type="spot", on_demand_base=1)
    big = node_pools.replicas_of([G5.model_copy(update={"cpu": 6, "memory_gib": 20})], "g5")
    *groups, base = node_pools.accelerator_plans("g5", g5.model_copy(update={"on_demand_fallback": False}), big)
    assert [p.min_size for p in groups] == [0, g5.min_size] and base.name == "pool-g5-2xlarge-on-demand"


def test_a_spot_pool_keeps_an_on_demand_baseline_and_replicas_spread_over_both():
    spot = node_pools.accelerator_plans("g5", G5PoolSpec(capacity_type="spot", on_demand_base=2))
    assert [(p.name, p.capacity_type, p.min_size, p.max_size) for p in spot] == [
        ("pool-g5-xlarge", "SPOT", 1, 4),
        ("pool-g5-2xlarge", "SPOT", 0, 4),
        ("pool-g5-xlarge-on-demand", "ON_DEMAND", 2, 2),
        # Behind each Spot group, empty until Spot cannot launch (the priority expander tries Spot first).
        ("pool-g5-xlarge-fallback", "ON_DEMAND", 0, 4),
        ("pool-g5-2xlarge-fallback", "ON_DEMAND", 0, 4),
    ]
    only_spot = G5PoolSpec(capacity_type="spot", on_demand_base=0, on_demand_fallback=False)
    assert [p.capacity_type for p in node_pools.accelerator_plans("g5", only_spot)] == ["SPOT", "SPOT"]
    assert len(node_pools.accelerator_plans("g5", G5PoolSpec())) == 2  # on demand: no baseline, no fallback
    keys = [c["topologyKey"] for c in pod(G5)["topologySpreadConstraints"]]
    assert "eks.amazonaws.com/capacityType" in keys


def test_the_autoscaler_tries_spot_groups_before_their_on_demand_fallbacks():
    """The priority expander matches its patterns against the node group's id, the Auto Scaling group's name
    (eks-<node group name>-<uuid>; Pulumi names the node group <plan name>-nodes-<suffix>), unanchored: each Spot
    pattern must match its own group only, never the baseline or fallback whose name begins the same."""
    plans = node_pools.system_plans() + node_pools.accelerator_plans("g5", G5PoolSpec(capacity_type="spot"))
    priorities = node_pools.expander_priorities(plans)
    assert priorities == {
        10: [".*"],
        20: ["^eks-pool-g5-xlarge-nodes-", "^eks-pool-g5-2xlarge-nodes-"],
    }
    import re

    def first(group: str) -> int:
        return max(p for p, patterns in priorities.items() if any(re.search(x, group) for x in patterns))

    asg = "eks-{}-nodes-a1b2c3d-8ec9f2a4-1b2c-4d5e-9f00-112233445566"
    assert first(asg.format("pool-g5-xlarge")) == first(asg.format("pool-g5-2xlarge")) == 20
    for name in ("pool-g5-xlarge-fallback", "pool-g5-xlarge-on-demand", "pool-system-large"):
        assert first(asg.format(name)) == 10, name
    every = [p for f, spec in NodePoolsSpec().declared().items() for p in node_pools.accelerator_plans(f, spec)]
    assert all(re.fullmatch(r"[a-z0-9-]+", p.name) for p in every + plans), "a plan name Go's regexp reads plainly"
    values = charts.cluster_autoscaler_values("c", "us-east-1", priorities)
    assert values["extraArgs"]["expander"] == "priority,least-waste"
    assert values["expanderPriorities"] == {"10": [".*"], "20": priorities[20]}
    # Without Spot: no priorities, the expander alone.
    on_demand = node_pools.system_plans() + node_pools.accelerator_plans("g5", G5PoolSpec())
    assert node_pools.expander_priorities(on_demand) == {}
    plain = charts.cluster_autoscaler_values("c", "us-east-1", {})
    assert plain["extraArgs"]["expander"] == "least-waste" and "expanderPriorities" not in plain


def test_each_group_tells_the_autoscaler_what_its_empty_nodes_offer():
    """Scale from zero: the autoscaler builds an empty group's node from these tags (its AWS provider README,
    "Scaling a node group to 0"); without the resource tag no pod asking for a Neuron device or GPU fits."""
    inf2 = node_pools.accelerator_plans("inf2", Inf2PoolSpec(instance_types=["inf2.xlarge", "inf2.48xlarge"]))
    assert inf2[1].template_tags() == {
        "k8s.io/cluster-autoscaler/node-template/label/mlinfra.io/accelerator": "inf2",
        "k8s.io/cluster-autoscaler/node-template/label/mlinfra.io/pool": "inf2",
        "k8s.io/cluster-autoscaler/node-template/taint/aws.amazon.com/neuron": "true:NoSchedule",
        "k8s.io/cluster-autoscaler/node-template/resources/aws.amazon.com/neuron": "12",
    }
    g5 = node_pools.accelerator_plans("g5", G5PoolSpec(instance_types=["g5.xlarge", "g5.12xlarge"]))
    tags = g5[1].template_tags()
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] == "4"
    # The label the autoscaler's AWS provider reads to treat a node as a GPU node, on node and template.
    assert tags["k8s.io/cluster-autoscaler/node-template/label/k8s.amazonaws.com/accelerator"] == "nvidia-a10g"
    assert g5[1].labels["k8s.amazonaws.com/accelerator"] == "nvidia-a10g"
    assert not any("/resources/" in key for key in node_pools.system_plans()[0].template_tags())


def test_charts_are_pinned():
    pinned = [
        charts.NVIDIA_DEVICE_PLUGIN,
        charts.NEURON,
        charts.keda_chart("1.33"),
        charts.PROMETHEUS,
        charts.cluster_autoscaler_chart("1.33"),
    ]
    for chart in pinned:
        assert chart.version and chart.version[0].isdigit() and chart.version.count(".") == 2, chart
        assert (chart.repository or "").startswith("https://") or chart.chart.startswith("oci://")
    assert len({c.release for c in pinned}) == len(pinned)


def test_the_nvidia_plugin_runs_on_every_gpu_pool():
    # Selected on g5 alone, a g4dn, g6 or g6e node would never advertise nvidia.com/gpu.
    selector = charts.nvidia_values()["nodeSelector"]
    for family in ("g5", "g4dn", "g6", "g6e"):
        pool = getattr(NodePoolsSpec(**{family: {}}), family)
        (plan, *_) = node_pools.accelerator_plans(family, pool)
        assert selector.items() <= plan.labels.items(), family
        assert plan.ami_type == "AL2023_x86_64_NVIDIA" and plan.taints[0].key == "nvidia.com/gpu"
    (inf2, *_) = node_pools.accelerator_plans("inf2", Inf2PoolSpec())
    assert not selector.items() <= inf2.labels.items()


def test_chart_values_place_plugins_on_their_pools():
    assert charts.nvidia_values()["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in charts.nvidia_values()[
        "tolerations"
    ]
    neuron = charts.neuron_values("1.33")
    assert neuron["devicePlugin"]["nodeSelector"] == {"mlinfra.io/accelerator": "inf2"}
    assert neuron["scheduler"]["enabled"] is True and neuron["npd"] == {"enabled": False}
    values = charts.cluster_autoscaler_values("mlinfra-demo", "us-east-1")
    assert values["autoDiscovery"] == {"clusterName": "mlinfra-demo"} and "image" not in values
    assert charts.cluster_autoscaler_chart("1.33").version == "9.51.0"
    assert values["extraArgs"]["scale-down-unneeded-time"] == "5m"


def test_iam_documents():
    trust = iam.pod_identity_trust()["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"} and set(trust["Action"]) == {
        "sts:AssumeRole",
        "sts:TagSession",
    }
    scoped = iam.pod_identity_trust(iam.PodScope("mlinfra-demo", "models", "llama"))["Statement"][0]
    assert scoped["Condition"] == {  # Pod Identity's session tags: this cluster, namespace and account only
        "StringEquals": {
            "aws:RequestTag/eks-cluster-name": "mlinfra-demo",
            "aws:RequestTag/kubernetes-namespace": "models",
            "aws:RequestTag/kubernetes-service-account": "llama",
        }
    }
    scale = iam.cluster_autoscaler_policy("mlinfra-demo")["Statement"][1]
    assert scale["Condition"] == {"StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/mlinfra-demo": "owned"}}


def test_eks_plans():
    plans = eks.subnet_plan("10.80.0.0/16", ["us-east-1a", "us-east-1b"])
    assert [(p.az, p.private_cidr, p.public_cidr) for p in plans] == [
        ("us-east-1a", "10.80.0.0/19", "10.80.128.0/21"),
        ("us-east-1b", "10.80.32.0/19", "10.80.136.0/21"),
    ]
    assert eks.log_group_name("mlinfra-x") == "/aws/eks/mlinfra-x/cluster"
    assert set(eks.CORE_ADDONS) == {"vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent"}
    config = eks.kubeconfig("c", "https://x", "Q0E=", "us-east-1")
    assert config["users"][0]["user"]["exec"]["args"] == [
        "eks",
        "get-token",
        "--cluster-name",
        "c",
        "--region",
        "us-east-1",
        "--output",
        "json",
    ]


@pytest.mark.parametrize(
    "files, code, said",
    [
        (["manifest.json", "model.safetensors"], 0, ""),
        (["manifest.json", "_FAILED"], 1, "refusing gs://b/models/m/v1/cuda/: marked _FAILED"),
        (["model.safetensors"], 1, "refusing gs://b/models/m/v1/cuda/: no manifest.json (promotion failed or"),
    ],
    ids=["served", "failed", "unfinished"],
)
def test_gke_servers_refuse_a_failed_or_unfinished_mounted_artefact(tmp_path, files, code, said):
    """The rendered check, run by /bin/sh against a directory standing for the FUSE mount."""
    import subprocess

    for name in files:
        (tmp_path / name).write_text("x", encoding="utf-8")
    command = servers.mounted_check_command("gs://b/models/m/v1/cuda/")
    command[-1] = command[-1].replace(f" {servers.MODEL_DIR}/", f" {tmp_path}/")
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == code and said in done.stderr
