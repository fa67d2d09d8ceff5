"""Serving rules (bounded autoscaling on inference signals) and no public node IPs, for serving and training:
the compliant stacks pass; each broken field gives its exact message."""

import pytest

from policies.model import UNKNOWN, Finding, Resource
from policies.rules.everywhere import nodes_without_public_ip
from policies.rules.serving import (
    autoscalers_have_replica_bounds,
    model_servers_fit_their_devices,
    model_servers_scale_on_inference_signals,
)
from tests.policies.policy_fixtures import (
    DEPLOYMENT,
    HPA,
    INSTANCE,
    LT,
    SCALED_OBJECT,
    SERVING,
    SUBNET,
    changed,
    model_architecture,
    model_deployment,
    one,
    res,
    serving_resources,
    stack_of,
    training_resources,
    urn,
    without,
)

SERVING_STACK = serving_resources()
TRAINING = training_resources()
T = "training-demo"


def run(module, resources):
    return module.RULE.check(stack_of(resources), module.RULE.defaults())


@pytest.mark.parametrize(
    "module", [model_servers_scale_on_inference_signals, nodes_without_public_ip], ids=lambda m: m.NAME
)
def test_compliant_stacks_pass(module):
    assert run(module, SERVING_STACK) == []
    assert run(module, TRAINING) == []


# --- autoscalers-have-replica-bounds -------------------------------------------------------------


def bounds(resources, name="llama-scaler"):
    resource = one(resources, name)
    assert autoscalers_have_replica_bounds.RULE.applies_to(resource.type)
    return autoscalers_have_replica_bounds.check(resource)


@pytest.mark.parametrize(
    "path, value, expected",
    [
        (
            "spec.maxReplicaCount",
            None,
            [
                "spec.maxReplicaCount is not set, so KEDA may run up to 100 replicas (its default), each "
                "holding accelerators; "
                "set maxReplicaCount to what the node pools can hold"
            ],
        ),
        (
            "spec.minReplicaCount",
            None,
            [
                "spec.minReplicaCount is not set, so KEDA scales to zero (its default) and requests wait for "
                "a cold start; set "
                "minReplicaCount: 1 or more for a warm replica, or 0 deliberately"
            ],
        ),
        (
            "spec.minReplicaCount",
            6,
            ["spec.minReplicaCount 6 is above spec.maxReplicaCount 4; set minReplicaCount at most maxReplicaCount"],
        ),
        ("spec.maxReplicaCount", 0, ["spec.maxReplicaCount is 0, so nothing can serve; set it to 1 or more"]),
        ("spec.minReplicaCount", 0, []),  # scale to zero, chosen explicitly
        ("spec.maxReplicaCount", 4.0, []),  # numbers arrive as doubles over the protocol
    ],
)
def test_scaled_object_bounds(path, value, expected):
    assert bounds(SERVING_STACK) == []
    broken = (
        changed(SERVING_STACK, "llama-scaler", path, delete=True)
        if value is None
        else changed(SERVING_STACK, "llama-scaler", path, value)
    )
    assert bounds(broken) == expected


def hpa(spec):
    return Resource(
        HPA,
        {"metadata": {"name": "llama", "namespace": "models"}, "spec": spec},
        urn=urn(SERVING, HPA, "llama-hpa"),
        name="llama-hpa",
    )


def test_hpa_bounds():
    target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama"}
    assert autoscalers_have_replica_bounds.check(hpa({"scaleTargetRef": target, "maxReplicas": 4})) == []
    assert autoscalers_have_replica_bounds.check(
        hpa({"scaleTargetRef": target, "minReplicas": 3, "maxReplicas": 2})
    ) == ["spec.minReplicas 3 is above spec.maxReplicas 2; set minReplicas at most maxReplicas"]
    assert autoscalers_have_replica_bounds.check(hpa({"scaleTargetRef": target})) == [
        "spec.maxReplicas is not set; set it to what the node pools can hold"
    ]


def test_unknown_autoscaler_spec_is_not_judged():
    scaler = Resource(SCALED_OBJECT, {"metadata": {"name": "x"}, "spec": UNKNOWN}, name="x")
    assert autoscalers_have_replica_bounds.check(scaler) == []


# --- model-servers-scale-on-inference-signals ----------------------------------------------------

DEPLOYMENT_URN = urn(SERVING, DEPLOYMENT, "llama-deployment")
SCALER_URN = urn(SERVING, SCALED_OBJECT, "llama-scaler")
FIX = "scale on queue depth (vllm:num_requests_waiting) or KV-cache use (vllm:gpu_cache_usage_perc)"
NO_AUTOSCALER = Finding(
    DEPLOYMENT_URN,
    (
        f"model server 'llama-deployment' (Deployment models/llama) has no autoscaler; add a KEDA ScaledObject with "
        f"Prometheus triggers (or an HPA on Pods metrics) that {FIX}, with min and max replicas"
    ),
)


def signals(resources):
    return run(model_servers_scale_on_inference_signals, resources)


@pytest.mark.parametrize(
    "broken",
    [
        without(SERVING_STACK, "llama-scaler"),
        changed(SERVING_STACK, "llama-scaler", "spec.scaleTargetRef.name", "mistral"),
        changed(
            SERVING_STACK, "llama-scaler", "metadata.namespace", "default"
        ),  # a ScaledObject scales its own namespace
        changed(SERVING_STACK, "llama-scaler", "spec.scaleTargetRef.kind", "StatefulSet"),
    ],
    ids=["no scaler", "other target", "other namespace", "other kind"],
)
def test_model_server_without_autoscaler(broken):
    assert signals(broken) == [NO_AUTOSCALER]


def test_scaled_object_on_cpu():
    cpu = changed(
        SERVING_STACK,
        "llama-scaler",
        "spec.triggers.1",
        {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "70"}},
    )
    assert signals(cpu) == [
        Finding(
            SCALER_URN,
            (
                f"ScaledObject 'llama-scaler' scales model server 'llama-deployment' on cpu (triggers[1]), "
                f"which does not "
                f"track accelerator load; {FIX} instead"
            ),
        )
    ]
    query = 'sum(rate(container_cpu_usage_seconds_total{namespace="models"}[1m]))'
    prometheus_cpu = changed(SERVING_STACK, "llama-scaler", "spec.triggers.0.metadata.query", query)
    assert [f.message.split(",")[0] for f in signals(prometheus_cpu)] == [
        "ScaledObject 'llama-scaler' scales model server 'llama-deployment' on prometheus (triggers[0])"
    ]
    assert signals(changed(SERVING_STACK, "llama-scaler", "spec.triggers", [])) == [
        Finding(
            SCALER_URN,
            (
                f"ScaledObject 'llama-scaler' of model server 'llama-deployment' has no triggers; add "
                f"Prometheus triggers "
                f"that {FIX}"
            ),
        )
    ]


@pytest.mark.parametrize(
    "metrics, expected",
    [
        (None, "on CPU (80% utilisation, the HPA default, as no metrics are set)"),
        (
            [
                {
                    "type": "Resource",
                    "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 80}},
                }
            ],
            "on Resource memory (metrics[0])",
        ),
        (
            [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": "vllm_num_requests_waiting"},
                        "target": {"type": "AverageValue", "averageValue": "4"},
                    },
                }
            ],
            None,
        ),
    ],
)
def test_hpa_signals(metrics, expected):
    spec = {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama"}, "maxReplicas": 4}
    if metrics is not None:
        spec["metrics"] = metrics
    found = signals(without(SERVING_STACK, "llama-scaler") + [hpa(spec)])
    if expected is None:
        assert found == []
    else:
        assert found == [
            Finding(
                urn(SERVING, HPA, "llama-hpa"),
                (
                    f"HorizontalPodAutoscaler 'llama-hpa' scales model server 'llama-deployment' {expected}, "
                    f"which does not "
                    f"track accelerator load; {FIX} instead"
                ),
            )
        ]


def test_what_counts_as_a_model_server():
    plain = model_deployment("web")
    plain["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    web = res(DEPLOYMENT, "web", plain, stack=SERVING)
    assert signals(SERVING_STACK + [web]) == []  # no accelerator, not labelled inference: not a model server
    labelled = model_deployment("ranker")
    labelled["metadata"]["labels"]["app.kubernetes.io/component"] = "inference"
    labelled["spec"]["template"]["spec"]["containers"][0]["resources"] = {}
    assert [f.urn for f in signals(SERVING_STACK + [res(DEPLOYMENT, "ranker", labelled, stack=SERVING)])] == [
        urn(SERVING, DEPLOYMENT, "ranker")
    ]
    gpu = res(DEPLOYMENT, "mistral", model_deployment("mistral", "nvidia.com/gpu"), stack=SERVING)
    assert [f.urn for f in signals(SERVING_STACK + [gpu])] == [urn(SERVING, DEPLOYMENT, "mistral")]


# --- nodes-without-public-ip ---------------------------------------------------------------------

FIX_IP = "nodes reach the internet through the NAT gateway or VPC endpoints"


def test_serving_node_subnet_maps_no_public_ips():
    broken = changed(SERVING_STACK, "private-a", "mapPublicIpOnLaunch", True)
    assert run(nodes_without_public_ip, broken) == [
        Finding(
            urn(SERVING, SUBNET, "private-a"),
            (
                f"subnet 'private-a' maps a public IP to every instance launched in it (mapPublicIpOnLaunch "
                f"true), and 'pool' "
                f"launch there; set mapPublicIpOnLaunch false ({FIX_IP})"
            ),
        )
    ]


def test_training_node_subnet_maps_no_public_ips():
    broken = changed(TRAINING, "private", "mapPublicIpOnLaunch", True)
    assert run(nodes_without_public_ip, broken) == [
        Finding(
            urn(T, SUBNET, "private"),
            (
                f"subnet 'private' maps a public IP to every instance launched in it (mapPublicIpOnLaunch true), and "
                f"'template' launch there; set mapPublicIpOnLaunch false ({FIX_IP})"
            ),
        )
    ]


def test_subnets_no_node_launches_into_are_not_this_rules():
    nat = res(SUBNET, "nat", {"mapPublicIpOnLaunch": True, "availabilityZone": "us-east-1a"}, stack=SERVING)
    assert run(nodes_without_public_ip, SERVING_STACK + [nat]) == []


def test_single_interface_templates_and_instances_ask_for_no_public_ip():
    single = changed(
        SERVING_STACK, "pool-lt", "networkInterfaces", [{"deviceIndex": 0, "associatePublicIpAddress": "true"}]
    )
    assert run(nodes_without_public_ip, single) == [
        Finding(
            urn(SERVING, LT, "pool-lt"),
            (f"'pool-lt' networkInterfaces[0] sets associatePublicIpAddress; remove it ({FIX_IP})"),
        )
    ]
    # several interfaces: multi-interface-instances-without-public-ip's (EC2 refuses them), not reported twice
    multi = changed(TRAINING, "template", "networkInterfaces.0.associatePublicIpAddress", "true")
    assert run(nodes_without_public_ip, multi) == []
    instance = res(INSTANCE, "bastion", {"instanceType": "m6i.large", "associatePublicIpAddress": True}, stack=SERVING)
    assert run(nodes_without_public_ip, SERVING_STACK + [instance]) == [
        Finding(
            urn(SERVING, INSTANCE, "bastion"),
            (
                f"'bastion' sets associatePublicIpAddress; remove it and launch into a subnet that maps no public IPs "
                f"({FIX_IP})"
            ),
        )
    ]


def test_karpenter_node_classes_ask_for_no_public_ip():
    kind = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
    node_class = res(
        kind,
        "gpu-class",
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "associatePublicIPAddress": True},
        },
        stack=SERVING,
    )
    assert run(nodes_without_public_ip, SERVING_STACK + [node_class]) == [
        Finding(
            urn(SERVING, kind, "gpu-class"),
            (f"Karpenter EC2NodeClass 'gpu-class' sets spec.associatePublicIPAddress; set it false ({FIX_IP})"),
        )
    ]


# --- model-servers-fit-their-devices ---------------------------------------------------------------


def fit(resources):
    return [f.message for f in run(model_servers_fit_their_devices, resources)]


def test_the_compliant_model_server_fits_its_inf2_nodes():
    assert fit(SERVING_STACK) == []


def test_a_model_server_without_its_architecture_is_a_violation():
    broken = changed(SERVING_STACK, "llama-deployment", "metadata.annotations", delete=True)
    assert fit(broken) == [
        "model server 'llama-deployment' has no mlinfra.io/model-architecture annotation, so its fit on the "
        "devices cannot be checked; set the model's modelConfig to its Hugging Face config.json (mlinfra writes "
        "the annotation from it)"
    ]


def test_a_70b_model_on_an_a10g_is_refused_with_the_memory_figures():
    big = changed(
        SERVING_STACK,
        "llama-deployment",
        "metadata.annotations",
        {"mlinfra.io/model-architecture": model_architecture("llama-3-70b"), "mlinfra.io/precision": "bf16"},
    )
    big = changed(big, "pool", "instanceTypes", ["g5.xlarge"])
    big = changed(big, "pool", "labels", {"mlinfra.io/accelerator": "g5"})
    big = changed(big, "llama-deployment", "spec.template.spec.nodeSelector", {"mlinfra.io/accelerator": "g5"})
    assert fit(big) == [
        "model server 'llama-deployment' does not fit its g5 nodes: llama at bf16 needs 131.4 GiB of weights (bf16) "
        "+ 1.2 GiB of KV cache for one sequence of 4096 tokens (bf16, 320 KiB per token) + 1.5 GiB runtime "
        "overhead = 134.2 GiB; the engine gets 20.1 GiB of 1 x A10G (22.4 GiB each), 114.1 GiB short"
    ]


def test_fp8_on_a10g_is_refused_naming_the_hardware():
    fp8 = changed(SERVING_STACK, "llama-deployment", "metadata.annotations",
                  {"mlinfra.io/model-architecture": model_architecture(), "mlinfra.io/precision": "fp8"})  # fmt: skip
    fp8 = changed(fp8, "pool", "instanceTypes", ["g5.xlarge"])
    fp8 = changed(fp8, "pool", "labels", {"mlinfra.io/accelerator": "g5"})
    fp8 = changed(fp8, "llama-deployment", "spec.template.spec.nodeSelector", {"mlinfra.io/accelerator": "g5"})
    assert fit(fp8) == [
        "model server 'llama-deployment' cannot run at fp8: A10G (Ampere) has no fp8 compute; it computes in fp32, "
        "bf16, fp16, int8"
    ]


def test_neuron_holds_every_batch_slot_at_full_length():
    long = changed(
        SERVING_STACK,
        "llama-deployment",
        "spec.template.spec.containers.0.args",
        ["--max-num-seqs", "32", "--max-model-len", "8192"],
    )
    (message,) = fit(long)
    assert "32.0 GiB of KV cache for 32 sequences x 8192 tokens" in message
