"""Serving config: shape (pydantic) and meaning (serving_checks), each problem naming its field."""

from __future__ import annotations

import copy
import ipaddress

import pytest

from infra.catalog.aws import instance_type
from infra.core.errors import InputError, Problem
from infra.kinds import load
from infra.serving.aws.checks import pool_types, serving_findings
from infra.serving.aws.config import ServingSpec, ServingStackConfig
from infra.serving.spec import PUBLIC_INTERNET_REFUSED
from tests.helpers import ROOT

MODELS = [
    {"name": "llama", "version": "1.0", "accelerator": "inf2", "image": "neuron-vllm:1"},
    {"name": "mistral", "version": "2.0", "accelerator": "g5", "image": "vllm/vllm-openai:v0.33.0"},
]


REFUSED = PUBLIC_INTERNET_REFUSED  # the one message, for the whole internet asked for either way


HUB_SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/docker-hub-AbCdEf"


def serving(**changes) -> dict:
    value = {"models": copy.deepcopy(MODELS), "imageMirror": {"dockerHubCredentialArn": HUB_SECRET}}
    value.update(changes)
    return value


def flat(value: dict) -> dict:
    import json

    return {
        "aws:region": "us-east-1",
        "mlinfra:kind": "serving",
        "mlinfra:registryStack": "registry",
        "mlinfra:serving": json.dumps(value),
    }


def problems(value: dict) -> list[str]:
    with pytest.raises(InputError) as caught:
        load(flat(value))
    return [str(p) for p in caught.value.problems]


def test_happy_config_loads_with_secure_defaults():
    config = load(flat(serving()))
    assert isinstance(config, ServingStackConfig)
    spec = config.serving
    assert spec.cluster.endpoint.access == "private" and spec.cluster.endpoint.public_access_cidrs == []
    assert spec.node_pools.inf2.capacity_type == "on-demand"
    assert len(spec.node_pools.inf2.instance_types) >= 2 and len(spec.node_pools.g5.instance_types) >= 2
    assert [m.artefact_variant for m in spec.models] == ["neuron", "cuda"]
    assert serving_findings(spec, "us-east-1") == []


def test_pool_types_come_from_the_catalog():
    assert pool_types("inf2") == ["inf2.xlarge", "inf2.8xlarge", "inf2.24xlarge", "inf2.48xlarge"]
    assert "g5.xlarge" in pool_types("g5") and "g6.xlarge" not in pool_types("g5")


def test_inf2_model_with_cuda_variant():
    value = serving()
    value["models"][0]["variant"] = "cuda"
    assert problems(value) == [
        "mlinfra:serving.models[0].variant: cuda artefacts cannot be served on inf2: "
        "inf2 runs Neuron-compiled artefacts only; use neuron, neuron-int8"
    ]


def test_a_variant_without_a_server_is_refused():
    value = serving()
    value["models"][1]["variant"] = "tensorrt"  # no model server of mlinfra loads TensorRT-LLM engines
    assert problems(value) == [
        "mlinfra:serving.models[1].variant: must be one of 'neuron', 'cuda', 'cuda-fp8', 'cuda-int4', "
        "'cuda-int8', 'neuron-int8' (got 'tensorrt')"
    ]


def test_max_replicas_below_min_replicas():
    value = serving()
    value["models"][1].update(minReplicas=5, maxReplicas=3)
    assert problems(value) == ["mlinfra:serving.models[1].maxReplicas: 3 is below minReplicas (5); use at least 5"]


def test_zero_max_replicas_is_a_shape_error():
    value = serving()
    value["models"][0]["maxReplicas"] = 0
    assert problems(value) == ["mlinfra:serving.models[0].maxReplicas: must be at least 1 (got 0)"]


def test_training_type_in_a_serving_pool():
    value = serving(nodePools={"g5": {"instanceTypes": ["p4d.24xlarge", "g5.xlarge"]}})
    [message] = problems(value)
    assert message.startswith(
        "mlinfra:serving.nodePools.g5.instanceTypes[0]: p4d.24xlarge is a training type; "
        "serving takes one of: inf2.xlarge, "
    )


def test_unknown_type_lists_close_names():
    value = serving(nodePools={"inf2": {"instanceTypes": ["inf2.xlarge", "inf2.8xlarg"]}})
    assert problems(value) == [
        "mlinfra:serving.nodePools.inf2.instanceTypes[1]: unknown instance type 'inf2.8xlarg'; "
        "closest known: inf2.8xlarge, inf2.48xlarge, inf2.xlarge"
    ]


def test_type_of_the_other_family():
    value = serving(nodePools={"inf2": {"instanceTypes": ["inf2.xlarge", "g5.xlarge"]}})
    assert problems(value) == [
        "mlinfra:serving.nodePools.inf2.instanceTypes[1]: g5.xlarge has A10G accelerators, not "
        "Inferentia2; the inf2 pool takes: inf2.xlarge, inf2.8xlarge, inf2.24xlarge, inf2.48xlarge"
    ]


def test_one_size_is_not_enough():
    value = serving(nodePools={"g5": {"instanceTypes": ["g5.xlarge"]}})
    assert problems(value) == [
        "mlinfra:serving.nodePools.g5.instanceTypes: List should have at least 2 items after validation, not 1"
    ]
    value = serving(nodePools={"g5": {"instanceTypes": ["g5.xlarge", "g5.xlarge"]}})
    assert problems(value) == [
        "mlinfra:serving.nodePools.g5.instanceTypes: lists a type twice; give two or more different sizes"
    ]


def test_pool_bounds():
    value = serving(nodePools={"g5": {"minSize": 3, "maxSize": 2}})
    assert problems(value) == ["mlinfra:serving.nodePools.g5.maxSize: 2 is below minSize (3); use at least 3"]
    assert problems(serving(nodePools={"g5": {"maxSize": 101}})) == [
        "mlinfra:serving.nodePools.g5.maxSize: must be at most 100 (got 101)"
    ]


def test_inf2_is_on_demand_only_and_g5_may_be_spot():
    assert problems(serving(nodePools={"inf2": {"capacityType": "spot"}})) == [
        "mlinfra:serving.nodePools.inf2.capacityType: must be one of 'on-demand' (got 'spot')"
    ]
    assert load(flat(serving(nodePools={"g5": {"capacityType": "spot"}}))).serving.node_pools.g5.capacity_type == "spot"


def test_accelerators_per_replica_must_fit_the_largest_size():
    value = serving()
    value["models"][0]["acceleratorsPerReplica"] = 2
    assert problems(value) == [
        "mlinfra:serving.models[0].acceleratorsPerReplica: 2 per replica, but the largest type "
        "of the inf2 pool (inf2.xlarge) has 1; lower it or add a larger size to "
        "nodePools.inf2.instanceTypes"
    ]
    # Disk for two replicas' 100 GiB artefact copies (the size without a modelConfig) on one node, and a surge.
    value["nodePools"] = {"inf2": {"instanceTypes": ["inf2.xlarge", "inf2.24xlarge"], "diskGib": 300}}
    assert load(flat(value)).serving.models[0].accelerators_per_replica == 2


def test_a_replica_no_node_of_its_pool_holds_is_refused_with_the_figures():
    """The demo's Neuron entry at 40 CPU and 200 GiB (an inf2.8xlarge leaves about 31.6 CPU and 126 GiB for pods)
    would stay Pending; the autoscaler would refuse to add a node for it and `pulumi up` wait out its timeout."""
    value = serving(nodePools={"inf2": {"instanceTypes": ["inf2.xlarge", "inf2.8xlarge"]}})
    value["models"][0].update(cpu=40, memoryGib=200)
    assert problems(value) == [
        "mlinfra:serving.models[0].cpu: 40: a replica of llama asks for 40 CPU and 200 GiB of memory; the largest "
        "node of the inf2 pool for it (inf2.8xlarge) leaves 31.6 CPU for pods (EKS AMI reservations and "
        "DaemonSets, estimated), so its pods would stay Pending: lower cpu or add inf2.24xlarge to "
        "nodePools.inf2.instanceTypes",
        "mlinfra:serving.models[0].memoryGib: 200: a replica of llama asks for 40 CPU and 200 GiB of memory; the "
        "largest node of the inf2 pool for it (inf2.8xlarge) leaves 126.0 GiB of memory for pods (EKS AMI "
        "reservations and DaemonSets, estimated), so its pods would stay Pending: lower memoryGib or add "
        "inf2.24xlarge to nodePools.inf2.instanceTypes",
    ]
    value["models"][0].update(cpu=24, memoryGib=100, maxReplicas=3)  # what an inf2.8xlarge holds, and a surge
    assert load(flat(value)).serving.models[0].cpu == 24


def test_a_rollout_at_max_replicas_must_have_a_node_for_its_surge_pod():
    """maxSurge 1 / maxUnavailable 0: at maxReplicas a rollout adds one pod. The demo's Neuron replica fits only an
    inf2.8xlarge, one per node; with maxSize 4 the fifth pod stays Pending and a promote's `pulumi up` never ends."""
    value = serving(nodePools={"inf2": {"instanceTypes": ["inf2.xlarge", "inf2.8xlarge"], "maxSize": 4}})
    value["models"][0].update(cpu=4, memoryGib=24, maxReplicas=4)
    assert problems(value) == [
        "mlinfra:serving.models[0].maxReplicas: 4: a rollout at 4 replicas surges one more, 5 pods, but the inf2 "
        "pool holds at most 4 (inf2.8xlarge: 1 per node; maxSize 4 per type): the surge pod would stay Pending and "
        "the rollout never end; raise nodePools.inf2.maxSize to 5 or lower maxReplicas to 3"
    ]
    value["nodePools"]["inf2"]["maxSize"] = 5
    assert load(flat(value)).serving.node_pools.inf2.max_size == 5


def test_a_spot_pools_on_demand_baseline_counts_for_the_surge():
    pool = {
        "instanceTypes": ["g5.xlarge", "g5.2xlarge"],
        "maxSize": 2,
        "capacityType": "spot",
        "onDemandFallback": False,
    }
    value = serving(nodePools={"g5": pool})
    value["models"][0].update(accelerator="g5", variant="cuda", image="docker.io/vllm/vllm-openai:v0.33.0")
    value["models"][0].update(maxReplicas=5, minReplicas=1)  # 2 + 2 Spot nodes and the on-demand one: 5
    value["models"] = value["models"][:1]  # the pool's only model
    assert problems(value) == [
        "mlinfra:serving.models[0].maxReplicas: 5: a rollout at 5 replicas surges one more, 6 pods, but the g5 "
        "pool holds at most 5 (g5.xlarge: 1 per node, g5.2xlarge: 1 per node; maxSize 2 per type, 1 on demand): the "
        "surge pod would stay Pending and the rollout never end; raise nodePools.g5.maxSize to 3 or lower "
        "maxReplicas to 4"
    ]
    value["models"][0]["maxReplicas"] = 4
    assert load(flat(value)).serving.models[0].max_replicas == 4
    # The on-demand fallbacks behind the Spot groups (2 more per type) hold the surge of 5 too.
    value["models"][0]["maxReplicas"] = 5
    pool["onDemandFallback"] = True
    assert load(flat(value)).serving.models[0].max_replicas == 5


def test_only_types_with_the_replicas_devices_count_for_its_cpu_and_memory():
    # g5.16xlarge has 64 vCPUs but one GPU; g5.12xlarge has the four GPUs and 48 vCPUs.
    value = serving(nodePools={"g5": {"instanceTypes": ["g5.12xlarge", "g5.16xlarge"]}})
    value["models"][0].update(
        accelerator="g5", variant="cuda", image="docker.io/vllm/vllm-openai:v0.33.0", acceleratorsPerReplica=4, cpu=50
    )
    assert problems(value) == [
        "mlinfra:serving.models[0].cpu: 50: a replica of llama asks for 50 CPU and 10 GiB of memory; the largest "
        "node of the g5 pool for it (g5.12xlarge) leaves 47.6 CPU for pods (EKS AMI reservations and DaemonSets, "
        "estimated), so its pods would stay Pending: lower cpu or add g5.24xlarge to nodePools.g5.instanceTypes"
    ]


INTERNET_LESS_PRIVATE = [
    str(n) for n in ipaddress.IPv4Network("0.0.0.0/0").address_exclude(ipaddress.IPv4Network("10.0.0.0/8"))
]


@pytest.mark.parametrize(
    "cidrs, reach",
    [
        (["0.0.0.0/0"], "3,702,258,432 public IPv4 addresses (100.0% of them)"),
        (["0.0.0.0/1", "128.0.0.0/1"], "3,702,258,432 public IPv4 addresses (100.0% of them)"),
        (["128.0.0.0/1", "0.0.0.0/2", "64.0.0.0/2"], "3,702,258,432 public IPv4 addresses (100.0% of them)"),
        (INTERNET_LESS_PRIVATE, "3,702,258,432 public IPv4 addresses (100.0% of them)"),  # spelt without 10/8
        # 2^31 less 0/8, 10/8, 127/8 and 100.64/10: half the internet is the internet.
        (["203.0.113.0/24", "0.0.0.0/1"], "2,092,957,696 public IPv4 addresses (56.5% of them)"),
    ],
)
def test_the_api_is_never_open_to_the_internet_at_large(cidrs, reach):
    """Config and the pack's mandatory eks-api-endpoint-restricted agree, on public address space rather than on
    0.0.0.0/0: refused here, not at policy time."""
    value = serving(cluster={"endpoint": {"access": "restricted", "publicAccessCidrs": cidrs}})
    assert problems(value) == [
        f"mlinfra:serving.cluster.endpoint.publicAccessCidrs: {', '.join(cidrs)} admit {reach}, the internet at "
        f"large: {REFUSED}"
    ]
    assert problems(serving(cluster={"endpoint": {"access": "public-internet"}})) == [
        f"mlinfra:serving.cluster.endpoint.access: {REFUSED} (got 'public-internet')"
    ]
    office = serving(
        cluster={"endpoint": {"access": "restricted", "publicAccessCidrs": ["198.51.100.0/24", "8.8.0.0/16"]}}
    )
    assert load(flat(office)).serving.cluster.endpoint.access == "restricted"  # named networks, however public


def test_restricted_needs_cidrs_and_cidrs_need_restricted():
    assert problems(serving(cluster={"endpoint": {"access": "restricted"}})) == [
        "mlinfra:serving.cluster.endpoint.publicAccessCidrs: required with access restricted: the CIDRs allowed to "
        "reach the Kubernetes API (or use access private)"
    ]
    assert problems(serving(cluster={"endpoint": {"publicAccessCidrs": ["198.51.100.0/24"]}})) == [
        "mlinfra:serving.cluster.endpoint.publicAccessCidrs: only used with access restricted (access is private); "
        "remove it or set cluster.endpoint.access to restricted"
    ]
    assert problems(serving(cluster={"endpoint": {"access": "restricted", "publicAccessCidrs": ["10.0.0.1/8"]}}))[
        0
    ].startswith("mlinfra:serving.cluster.endpoint.publicAccessCidrs: '10.0.0.1/8' is not an IPv4 CIDR")


def test_log_retention_must_be_a_cloudwatch_value():
    [message] = problems(serving(cluster={"logRetentionDays": 10}))
    assert message.startswith(
        "mlinfra:serving.cluster.logRetentionDays: CloudWatch Logs does not offer 10 days; one of 1, 3,"
    )


def test_kubernetes_version_needs_a_pinned_autoscaler_chart_and_scheduler():
    [message] = problems(serving(cluster={"kubernetesVersion": "1.31"}))
    assert message == (
        "mlinfra:serving.cluster.kubernetesVersion: no pinned cluster autoscaler chart and "
        "kube-scheduler; one of 1.32, 1.33 (got '1.31')"
    )


@pytest.mark.parametrize("version", ["1.99", "2.0", "1.27"])
def test_a_kubernetes_version_eks_never_released_is_named_as_such(version):
    [message] = problems(serving(cluster={"kubernetesVersion": version}))
    assert message == (
        f"mlinfra:serving.cluster.kubernetesVersion: {version} is not a Kubernetes version EKS has released "
        f"(1.28 to 1.35 as of 2026-02-14); mlinfra pins charts for 1.32, 1.33 (got '{version}')"
    )


def test_every_pinned_release_is_an_eks_version_with_its_dates():
    from infra.catalog.eks_versions import eks_versions, support_dates
    from infra.serving.charts import KUBERNETES_RELEASES

    assert set(KUBERNETES_RELEASES) <= set(eks_versions())
    for version in KUBERNETES_RELEASES:
        dates = support_dates(version)
        assert dates["released"] < dates["standardSupportEnds"] < dates["extendedSupportEnds"]


def test_unknown_keys_and_duplicate_models():
    value = serving()
    value["models"][0]["replicas"] = 2
    [message] = problems(value)
    assert message.startswith(
        "mlinfra:serving.models[0].replicas: unknown key (did you mean 'minReplicas'?); "
        "allowed: accelerator, acceleratorsPerReplica,"
    )
    value = serving()
    value["models"][1]["name"] = "llama"
    assert problems(value) == ["mlinfra:serving.models: model name 'llama' appears twice; each model gets one server"]


def test_type_not_offered_in_the_region():
    spec = ServingSpec.model_validate(serving(imageMirror={"enabled": False}))
    # g5 is offered in us-east-1; a region the catalog has no offerings for gets a finding per type.
    findings = serving_findings(spec, "xx-nowhere-1")
    regions = ", ".join(instance_type("inf2.xlarge").regions)
    assert (
        Problem(
            "mlinfra:serving.nodePools.inf2.instanceTypes[0]",
            f"inf2.xlarge is not offered in xx-nowhere-1; regions that offer it: {regions}",
        )
        in findings
    )
    assert len(findings) == 4


@pytest.mark.parametrize(
    "image",
    [
        "vllm/vllm-openai",  # no tag or digest: whatever "latest" is that day
        "vllm/vllm-openai:v0.33.0 --evil",
        "vllm/vllm-openai:v0.33.0\nx",
        "VLLM/openai:v1",
        "vllm/vllm-openai@sha256:abc",
    ],
)
def test_an_image_is_a_pinned_reference_and_nothing_else(image):
    value = serving()
    value["models"][0]["image"] = image
    (problem,) = problems(value)
    assert problem.startswith("mlinfra:serving.models[0].image: must be an image reference pinned by a tag or a digest")


@pytest.mark.parametrize(
    "image",
    [
        "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.16.0-neuronx-py312-sdk2.31.1-ubuntu24.04",
        "localhost:5000/team/server:1.0",
        "vllm/vllm-openai@sha256:" + "a" * 64,
        "docker.io/vllm/vllm-openai:v0.33.0@sha256:" + "0" * 64,
    ],
)
def test_pinned_references_are_accepted(image):
    value = serving()
    value["models"][0]["image"] = image
    assert load(flat(value)).serving.models[0].image == image


def test_aliases_is_not_a_version():
    value = serving()
    value["models"][0]["version"] = "aliases"
    assert problems(value) == [
        "mlinfra:serving.models[0].version: 'aliases' is reserved: models/<name>/aliases/ is not a version "
        "(got 'aliases')"
    ]


def test_docker_hub_images_come_through_the_mirror_only_with_a_credential():
    [message] = problems(serving(imageMirror={}))
    assert message == (
        "mlinfra:serving.imageMirror.dockerHubCredentialArn: models llama, mistral use Docker Hub images, which "
        "ECR's pull-through cache mirrors only with a Docker Hub credential: name a Secrets Manager secret "
        "(ecr-pullthroughcache/...), use an image from ECR Public or your own ECR, or set imageMirror.enabled: "
        "false to pull from Docker Hub directly"
    )
    load(flat(serving(imageMirror={"enabled": False})))  # pulls from Docker Hub directly: accepted
    elsewhere = HUB_SECRET.replace("us-east-1", "us-west-2")
    assert problems(serving(imageMirror={"dockerHubCredentialArn": elsewhere})) == [
        "mlinfra:serving.imageMirror.dockerHubCredentialArn: the secret is in us-west-2; ECR reads it in the "
        "stack's region, us-east-1"
    ]
    [shape] = problems(serving(imageMirror={"dockerHubCredentialArn": HUB_SECRET.replace("ecr-pullthroughcache/", "")}))
    assert shape.startswith(
        "mlinfra:serving.imageMirror.dockerHubCredentialArn: must be a Secrets Manager secret ARN whose name starts "
        "with ecr-pullthroughcache/"
    )


def test_a_model_on_an_undeclared_family_names_the_pool_to_declare():
    value = serving()
    value["models"][1]["accelerator"] = "g6"
    assert problems(value) == [
        "mlinfra:serving.models[1].accelerator: g6 has no node pool; declare nodePools.g6 (e.g. g6: {} for its "
        "default sizes) or use one of: inf2, g5"
    ]


@pytest.mark.parametrize(("family", "device"), [("g4dn", "T4"), ("g6", "L4"), ("g6e", "L40S")])
def test_every_gpu_family_is_a_pool_with_its_own_types(family, device):
    value = serving(nodePools={family: {}})
    value["models"][1]["accelerator"] = family
    spec = load(flat(value)).serving
    assert list(spec.node_pools.declared()) == ["inf2", "g5", family]
    assert all(instance_type(t).accelerator_model == device for t in pool_types(family))
    assert serving_findings(spec, "us-east-1") == []
    wrong = serving(nodePools={family: {"instanceTypes": [f"{family}.xlarge", "g5.2xlarge"]}})
    assert problems(wrong) == [
        f"mlinfra:serving.nodePools.{family}.instanceTypes[1]: g5.2xlarge has A10G accelerators, not {device}; "
        f"the {family} pool takes: {', '.join(pool_types(family))}"
    ]


def with_architecture(config: str, **model) -> dict:
    value = serving()
    value["models"][1].update(modelConfig=f"stacks/models/{config}/config.json", **model)
    return value


def test_70b_bf16_on_g5_xlarge_is_refused_with_the_memory_figures():
    value = with_architecture("llama-3-70b")
    value["nodePools"] = {"g5": {"instanceTypes": ["g5.xlarge", "g5.2xlarge"]}}
    assert problems(value) == [
        "mlinfra:serving.models[1].acceleratorsPerReplica: does not fit: mistral at bf16 needs 131.4 GiB of weights "
        "(bf16) + 1.2 GiB of KV cache for one sequence of 4096 tokens (bf16, 320 KiB per token) + 1.5 GiB runtime "
        "overhead = 134.2 GiB; the engine gets 20.1 GiB of 1 x A10G (22.4 GiB each), 114.1 GiB short; raise "
        "acceleratorsPerReplica (a larger size of the pool) or pick a device with more memory"
    ]


def test_an_8b_model_with_a_128k_context_on_a_24_gb_device_is_refused():
    assert problems(with_architecture("llama-3-8b", maxModelLen=131072)) == [
        "mlinfra:serving.models[1].maxModelLen: does not fit: mistral at bf16 needs 15.0 GiB of weights (bf16) + "
        "16.0 GiB of KV cache for one sequence of 131072 tokens (bf16, 128 KiB per token) + 1.5 GiB runtime "
        "overhead = 32.5 GiB; the engine gets 20.1 GiB of 1 x A10G (22.4 GiB each), 12.3 GiB short; lower "
        "maxModelLen"
    ]


def test_fp8_on_a10g_is_refused_naming_the_hardware():
    assert problems(with_architecture("llama-3-8b", precision="fp8")) == [
        "mlinfra:serving.models[1].precision: fp8 on g5: A10G (Ampere) has no fp8 compute; it computes in fp32, "
        "bf16, fp16, int8"
    ]


def test_a_precision_the_variant_does_not_provide_is_refused():
    value = with_architecture("llama-3-8b", precision="int4")
    assert problems(value) == [
        "mlinfra:serving.models[1].precision: the cuda variant serves bf16, fp16, not int4; a quantised precision "
        "needs a variant built for it"
    ]


def test_a_neuron_model_holds_its_whole_batch_at_full_length():
    value = serving()
    value["models"][0].update(modelConfig="stacks/models/llama-3-8b/config.json", maxNumSeqs=32, maxModelLen=8192)
    (message,) = problems(value)
    assert message.startswith("mlinfra:serving.models[0].maxModelLen: does not fit: llama at bf16 needs 15.0 GiB")
    assert "32.0 GiB of KV cache for 32 sequences x 8192 tokens" in message and message.endswith("or maxNumSeqs")


def test_an_unreadable_model_config_names_the_key_and_the_file():
    assert problems(with_architecture("no-such-model")) == [
        "mlinfra:serving.models[1].modelConfig: "
        f"{ROOT / 'stacks/models/no-such-model/config.json'}: no such file (a model's Hugging Face config.json)"
    ]
    value = serving()
    value["models"][1]["precision"] = "fp4"
    assert problems(value) == [
        "mlinfra:serving.models[1].precision: 'fp4' is not a precision; one of bf16, fp16, fp8, int8, w8a16, int4 "
        "(got 'fp4')"
    ]


def test_an_slo_the_model_says_cannot_be_met_is_refused_naming_the_figure():
    value = with_architecture("llama-3-8b", slo={"ttftP95Ms": 100, "tpotP95Ms": 10, "promptTokensP95": 2048})
    found = problems(value)
    assert [p.split(": ")[0] for p in found] == [
        "mlinfra:serving.models[1].slo.ttftP95Ms",
        "mlinfra:serving.models[1].slo.tpotP95Ms",
    ]
    assert found[0].startswith(
        "mlinfra:serving.models[1].slo.ttftP95Ms: 100 ms cannot be met: on 1 x A10G at bf16 a 2048-token prompt takes "
    )
    assert "ms to its first token with no other request" in found[0]
    assert "10 ms cannot be met: on 1 x A10G at bf16 one output token takes 33.2 ms" in found[1]
    assert load(flat(with_architecture("llama-3-8b", slo={"ttftP95Ms": 3000, "tpotP95Ms": 60}))).serving


def test_the_queue_depth_target_follows_the_slo_unless_set_by_hand():
    from infra.serving import fit

    loose = load(flat(with_architecture("llama-3-8b", slo={"ttftP95Ms": 5000, "tpotP95Ms": 60}))).serving.models[1]
    tight = load(flat(with_architecture("llama-3-8b", slo={"ttftP95Ms": 1500, "tpotP95Ms": 60}))).serving.models[1]
    assert fit.queue_depth_target(loose) > fit.queue_depth_target(tight) >= 1
    by_hand = with_architecture("llama-3-8b", slo={"ttftP95Ms": 5000, "tpotP95Ms": 60})
    by_hand["models"][1]["autoscaling"] = {"queueDepthTarget": 9}
    assert fit.queue_depth_target(load(flat(by_hand)).serving.models[1]) == 9
    assert fit.queue_depth_target(load(flat(serving())).serving.models[1]) == fit.DEFAULT_QUEUE_DEPTH


def test_a_neuron_artefact_larger_than_the_nodes_disk_is_refused_with_the_size_that_holds_it():
    """A Neuron replica copies its artefact to the node's disk before it starts: 70B in bf16 is ~170 GiB with its
    graphs, where a 200 GiB root volume leaves 140 GiB (a fixed 100 GiB volume evicted it mid-copy)."""
    big = {"instanceTypes": ["inf2.24xlarge", "inf2.48xlarge"], "maxSize": 3}
    value = serving(nodePools={"inf2": big, "g5": {}})
    value["models"][0].update(
        modelConfig="stacks/models/llama-3-70b/config.json", acceleratorsPerReplica=12, maxReplicas=2, cpu=16
    )
    value["models"][0]["memoryGib"] = 160
    assert problems(value) == [
        "mlinfra:serving.nodePools.inf2.diskGib: 200: a replica of llama copies its artefact (170 GiB, estimated "
        "from modelConfig) to the node's disk, and a 200 GiB root volume leaves 140 GiB for it (the kubelet's "
        "eviction threshold and 40 GiB for the OS and images): raise diskGib to 234"
    ]
    value["nodePools"]["inf2"]["diskGib"] = 234
    assert load(flat(value)).serving.node_pools.inf2.disk_gib == 234


def test_replicas_per_node_count_the_disk_their_artefacts_take():
    # Two 100 GiB copies (no modelConfig) do not share a 200 GiB root volume: one replica per inf2.24xlarge, so
    # three replicas and a surge need four nodes.
    value = serving(nodePools={"inf2": {"instanceTypes": ["inf2.xlarge", "inf2.24xlarge"], "maxSize": 3}})
    value["models"][0].update(acceleratorsPerReplica=2, maxReplicas=3)
    found = problems(value)
    assert len(found) == 1 and found[0].startswith("mlinfra:serving.models[0].maxReplicas: 3: a rollout")
    assert "holds at most 3 (inf2.24xlarge: 1 per node" in found[0]
    value["nodePools"]["inf2"]["diskGib"] = 300  # 230 GiB usable: two copies a node
    assert load(flat(value)).serving.models[0].max_replicas == 3


def test_models_sharing_a_pool_are_counted_together():
    # Each fits alone (4 replicas + 1 surge on two groups of 4 single-GPU nodes), but both at their peak need 10.
    value = serving(nodePools={"inf2": {}, "g5": {"maxSize": 4}})
    value["models"] = [
        value["models"][0],
        {**MODELS[1], "maxReplicas": 4},
        {**MODELS[1], "name": "qwen", "maxReplicas": 4},
    ]
    assert problems(value) == [
        "mlinfra:serving.nodePools.g5.maxSize: 4: the g5 pool's models (mistral: 4 + 1 x 1, qwen: 4 + 1 x 1) need 10 "
        "accelerators at their maxReplicas with a rollout's surge, but its groups reach 8: raise maxSize to 6 or "
        "lower the models' maxReplicas"
    ]
    value["nodePools"]["g5"]["maxSize"] = 5
    assert len(load(flat(value)).serving.models) == 3


CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/0f3c2a9e-5b7d-4e21-9c8a-1d2e3f4a5b6c"
API_KEYS = "arn:aws:secretsmanager:us-east-1:123456789012:secret:mlinfra/api-keys-AbCdEf"


def with_gateway(**changes) -> dict:
    return serving(
        gateway={
            "hostname": "models.example.com",
            "certificateArn": CERTIFICATE,
            "apiKeysSecretArn": API_KEYS,
            **changes,
        }
    )


def test_a_gateway_defaults_to_api_keys_and_a_request_limit():
    spec = load(flat(with_gateway())).serving
    assert spec.gateway is not None and spec.gateway.auth == "api-key"
    assert spec.gateway.rate_limits.requests_per_minute == 600 and spec.gateway.rate_limits.tokens_per_minute is None
    assert serving_findings(spec, "us-east-1") == []


@pytest.mark.parametrize(
    "hostname", ["https://models.example.com", "models", "*.example.com", "Models.Example.com", "a..b.com"]
)
def test_a_hostname_that_is_not_a_dns_name(hostname):
    (problem,) = problems(with_gateway(hostname=hostname))
    assert problem.startswith("mlinfra:serving.gateway.hostname: ") and "is not a DNS name" in problem


@pytest.mark.parametrize("key", ["requestsPerMinute", "tokensPerMinute"])
@pytest.mark.parametrize("value", [0, -5])
def test_rate_limits_that_are_zero_or_negative(key, value):
    (problem,) = problems(with_gateway(rateLimits={key: value}))
    assert problem == f"mlinfra:serving.gateway.rateLimits.{key}: must be at least 1 (got {value})"


def test_a_certificate_in_another_region():
    other = CERTIFICATE.replace("us-east-1", "eu-west-1")
    assert problems(with_gateway(certificateArn=other)) == [
        "mlinfra:serving.gateway.certificateArn: the certificate is in eu-west-1, the stack in us-east-1: a load "
        "balancer uses ACM certificates of its own region only; request or import the certificate in us-east-1"
    ]


def test_a_certificate_that_is_not_an_acm_arn():
    (problem,) = problems(with_gateway(certificateArn="arn:aws:iam::123456789012:server-certificate/x"))
    assert problem.startswith("mlinfra:serving.gateway.certificateArn: ") and "not an ACM certificate ARN" in problem


def test_auth_none_without_source_networks_is_refused():
    assert problems(with_gateway(auth="none", apiKeysSecretArn=None)) == [
        "mlinfra:serving.gateway.sourceCidrs: required with auth none, and not the whole internet: list the networks "
        "allowed to call the unauthenticated endpoint (mandatory policy unauthenticated-gateways-restrict-sources), "
        "or use auth api-key"
    ]
    (problem,) = problems(with_gateway(auth="none", apiKeysSecretArn=None, sourceCidrs=["0.0.0.0/0"]))
    assert problem.startswith("mlinfra:serving.gateway.sourceCidrs: required with auth none")
    # The internet split in halves is the internet, as the pack's unauthenticated-gateways-restrict-sources reads it.
    (problem,) = problems(with_gateway(auth="none", apiKeysSecretArn=None, sourceCidrs=["0.0.0.0/1", "128.0.0.0/1"]))
    assert problem.startswith("mlinfra:serving.gateway.sourceCidrs: required with auth none")


def test_api_keys_follow_the_auth_mode():
    assert problems(with_gateway(apiKeysSecretArn=None)) == [
        "mlinfra:serving.gateway.apiKeysSecretArn: required with auth api-key: the Secrets Manager secret holding "
        "the clients' API keys"
    ]
    assert problems(with_gateway(auth="none", sourceCidrs=["198.51.100.0/24"])) == [
        "mlinfra:serving.gateway.apiKeysSecretArn: only used with auth api-key (auth is none); remove it or set auth "
        "api-key"
    ]


def test_an_unknown_gateway_key_is_an_error():
    (problem,) = problems(with_gateway(tls=False))
    assert problem.startswith("mlinfra:serving.gateway.tls: ")
