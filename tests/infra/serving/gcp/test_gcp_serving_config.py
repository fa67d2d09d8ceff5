"""`mlinfra:cloud` and the GCP serving config: default aws, bad values exit 2 naming the key."""

import pytest

from infra.core.errors import InputError
from infra.kinds import cloud_of, load
from tests.helpers import run_cli

MODEL = {"name": "m", "version": "1", "accelerator": "l4", "image": "vllm/vllm-openai:v0.33.0"}


def gcp(**serving):
    spec = {"modelStore": {"bucket": "models-bridge"}, "models": [MODEL], **serving}
    return {
        "gcp:project": "mlinfra-demo-project",
        "gcp:region": "us-central1",
        "mlinfra:kind": "serving",
        "mlinfra:cloud": "gcp",
        "mlinfra:serving": spec,
    }


def problems(flat):
    with pytest.raises(InputError) as error:
        load(flat)
    return [(p.path, p.message) for p in error.value.problems]


def test_cloud_defaults_to_aws_and_may_be_spelt_out():
    flat = {"aws:region": "us-east-1", "mlinfra:kind": "registry"}
    assert cloud_of(load(flat)) == "aws"
    assert cloud_of(load({**flat, "mlinfra:cloud": "aws"})) == "aws"


def test_gcp_serving_loads():
    config = load(gcp())
    assert (config.kind, config.cloud, config.serving.node_pools.l4.machine_types) == (
        "serving",
        "gcp",
        ["g2-standard-8"],
    )


@pytest.mark.parametrize(
    "flat, expected",
    [
        ({**gcp(), "mlinfra:cloud": "azure"}, [("mlinfra:cloud", "'azure' is not a cloud; allowed: aws, gcp")]),
        (
            {k: v for k, v in gcp().items() if k != "gcp:project"},
            [("gcp:project", "required with mlinfra:cloud gcp: the project id the stack deploys to")],
        ),
        (
            {**gcp(), "gcp:region": "Iowa"},
            [("gcp:region", "must be a GCP region name such as us-central1 (got 'Iowa')")],
        ),
        (
            gcp(nodePools={"l4": {"machineTypes": ["g2-standard-9"]}}),
            [
                (
                    "mlinfra:serving.nodePools.l4.machineTypes[0]",
                    "unknown GCP machine type 'g2-standard-9'; closest known: "
                    "g2-standard-96, g2-standard-8, g2-standard-4",
                )
            ],
        ),
        (
            gcp(nodePools={"l4": {"machineTypes": ["a3-highgpu-8g"]}}),
            [
                (
                    "mlinfra:serving.nodePools.l4.machineTypes[0]",
                    "a3-highgpu-8g has H100 GPUs (nvidia-h100-80gb), not nvidia-l4; the l4 pool takes: "
                    "g2-standard-12, g2-standard-16, g2-standard-24, g2-standard-32, g2-standard-4, g2-standard-48, "
                    "g2-standard-8, g2-standard-96",
                )
            ],
        ),
        (
            gcp(nodePools={"l4": {"minNodes": 3, "maxNodes": 2}}),
            [("mlinfra:serving.nodePools.l4.maxNodes", "2 is below minNodes (3); use at least 3")],
        ),
        (
            gcp(models=[{**MODEL, "variant": "neuron"}]),
            [
                (
                    "mlinfra:serving.models[0].variant",
                    "neuron artefacts cannot be served on l4: the l4 server is vLLM on CUDA, "
                    "which loads cuda artefacts; use cuda, cuda-fp8, cuda-int4, cuda-int8",
                )
            ],
        ),
        (
            gcp(models=[{**MODEL, "accelerator": "g5"}]),
            [("mlinfra:serving.models[0].accelerator", "must be one of 'l4', 'a100' (got 'g5')")],
        ),
        (
            {k: v for k, v in gcp().items() if k != "mlinfra:serving"} | {"mlinfra:serving": {"models": [MODEL]}},
            [("mlinfra:serving.modelStore", "required: Where the servers read models from (the GCS bridge bucket).")],
        ),
    ],
)
def test_bad_values_name_the_key(flat, expected):
    assert problems(flat) == expected


def test_cli_exits_2_with_one_line_naming_the_cloud_key():
    done = run_cli("preview", "--stack", "serving-gcp-demo", "-c", "mlinfra:cloud=azure")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["error: mlinfra:cloud: 'azure' is not a cloud; allowed: aws, gcp"]


def test_an_a100_model_needs_the_a100_pool():
    assert problems(gcp(models=[{**MODEL, "accelerator": "a100"}])) == [
        (
            "mlinfra:serving.models[0].accelerator",
            "a100 has no node pool; declare nodePools.a100 (e.g. a100: {} for its default machine type) or use one "
            "of: l4",
        )
    ]


def test_the_a100_pool_takes_a2_machines_of_either_memory():
    for machine in ("a2-highgpu-1g", "a2-ultragpu-2g"):
        config = load(gcp(nodePools={"a100": {"machineTypes": [machine]}}, models=[{**MODEL, "accelerator": "a100"}]))
        assert list(config.serving.node_pools.declared()) == ["l4", "a100"]
    assert problems(gcp(nodePools={"a100": {"machineTypes": ["g2-standard-8"]}})) == [
        (
            "mlinfra:serving.nodePools.a100.machineTypes[0]",
            "g2-standard-8 has L4 GPUs (nvidia-l4), not nvidia-tesla-a100 or nvidia-a100-80gb; the a100 pool takes: "
            "a2-highgpu-1g, a2-highgpu-2g, a2-highgpu-4g, a2-highgpu-8g, a2-ultragpu-1g, a2-ultragpu-2g, "
            "a2-ultragpu-4g, a2-ultragpu-8g",
        )
    ]


def test_the_fit_check_reads_the_a100_pools_memory():
    model = {**MODEL, "accelerator": "a100", "modelConfig": "stacks/models/llama-3-70b/config.json"}
    small = gcp(nodePools={"a100": {"machineTypes": ["a2-highgpu-1g"]}}, models=[model])
    assert problems(small) == [
        (
            "mlinfra:serving.models[0].acceleratorsPerReplica",
            "does not fit: m at bf16 needs 131.4 GiB of weights (bf16) + 1.2 GiB of KV cache for one sequence of 4096 "
            "tokens (bf16, 320 KiB per token) + 1.5 GiB runtime overhead = 134.2 GiB; the engine gets 36.0 GiB of 1 x "
            "A100-40GB (40.0 GiB each), 98.2 GiB short; raise acceleratorsPerReplica (a larger size of the pool) or "
            "pick a device with more memory",
        )
    ]
    large = gcp(
        nodePools={"a100": {"machineTypes": ["a2-ultragpu-2g"]}}, models=[{**model, "acceleratorsPerReplica": 2}]
    )
    assert load(large).serving.models[0].accelerators_per_replica == 2


def test_a_replica_no_node_of_its_pool_holds_is_refused_with_the_machine_that_would():
    """A g2-standard-8 (8 vCPU, 32 GiB) leaves about 7.6 CPU and 27.7 GiB for pods after GKE's reservations
    (25% of the first 4 GiB, 20% of the next 4, 10% of the next 8, 6% above) and its DaemonSets; the model's
    FUSE sidecar asks for 0.25 CPU and 256 MiB on top of the server."""
    assert problems(gcp(models=[{**MODEL, "memoryGib": 28}])) == [
        (
            "mlinfra:serving.models[0].memoryGib",
            "28: a replica of m asks for 2.25 CPU and 28.25 GiB with its Cloud Storage FUSE sidecar; a g2-standard-8 "
            "node leaves 27.7 GiB of memory for pods (GKE's reservations and DaemonSets, estimated), so its pods "
            "would stay Pending: lower memoryGib or use g2-standard-12 in nodePools.l4.machineTypes",
        )
    ]
    assert problems(gcp(models=[{**MODEL, "cpu": 8}]))[0][0] == "mlinfra:serving.models[0].cpu"
    fixed = gcp(nodePools={"l4": {"machineTypes": ["g2-standard-12"]}}, models=[{**MODEL, "memoryGib": 28}])
    assert load(fixed).serving.models[0].memory_gib == 28


TLS = "projects/mlinfra-demo-project/secrets/models-tls"
KEYS = "projects/mlinfra-demo-project/secrets/models-api-keys"


def with_gateway(**changes):
    return gcp(gateway={"hostname": "models.example.com", "tlsSecret": TLS, "apiKeysSecret": KEYS, **changes})


def test_a_gateway_loads_with_its_secrets_in_the_stack_s_project():
    gateway = load(with_gateway()).serving.gateway
    assert gateway is not None and (gateway.auth, gateway.tls_secret, gateway.api_keys_secret) == ("api-key", TLS, KEYS)


@pytest.mark.parametrize("field, name", [("tlsSecret", TLS), ("apiKeysSecret", KEYS)])
def test_a_secret_in_another_project_is_refused(field, name):
    other = name.replace("mlinfra-demo-project", "someone-elses-project")
    assert problems(with_gateway(**{field: other})) == [
        (
            f"mlinfra:serving.gateway.{field}",
            "the secret is in project someone-elses-project, the stack in mlinfra-demo-project: the gateway reads "
            "secrets of its own project only; create it in mlinfra-demo-project (projects/mlinfra-demo-project/"
            "secrets/...)",
        )
    ]


@pytest.mark.parametrize(
    "name",
    ["models-tls", "projects/123456789012/secrets/models-tls", "projects/p-x/secrets/a b", TLS + "/versions/1"],
)
def test_a_secret_that_is_not_a_secret_name(name):
    ((path, message),) = problems(with_gateway(tlsSecret=name))
    assert path == "mlinfra:serving.gateway.tlsSecret" and "is not a Secret Manager secret name" in message


def test_the_certificate_is_required_and_keys_follow_the_auth_mode():
    ((path, message),) = problems(gcp(gateway={"hostname": "models.example.com", "apiKeysSecret": KEYS}))
    assert path == "mlinfra:serving.gateway.tlsSecret" and message.startswith("required")
    assert problems(with_gateway(apiKeysSecret=None)) == [
        (
            "mlinfra:serving.gateway.apiKeysSecret",
            "required with auth api-key: the Secret Manager secret holding the clients' API keys",
        )
    ]
    assert problems(with_gateway(auth="none")) == [
        (
            "mlinfra:serving.gateway.sourceCidrs",
            "required with auth none, and not the whole internet: list the networks allowed to call the "
            "unauthenticated endpoint (mandatory policy unauthenticated-gateways-restrict-sources), or use auth "
            "api-key",
        ),
        (
            "mlinfra:serving.gateway.apiKeysSecret",
            "only used with auth api-key (auth is none); remove it or set auth api-key",
        ),
    ]


def test_a_bad_gateway_exits_2_naming_the_key_before_anything_is_declared():
    result = run_cli(
        "preview",
        "--stack",
        "serving-gcp-demo",
        "-c",
        "mlinfra:serving.gateway.tlsSecret=projects/other-project-1/secrets/tls",
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "mlinfra:serving.gateway.tlsSecret" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "to create" not in result.stdout
