"""Image references rewritten to the account's ECR pull-through cache (docker's reference rules)."""

from __future__ import annotations

import pytest

from infra.serving.aws import mirror

HOST = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
BOTH = mirror.Mirror(HOST, ("ecr-public", "docker-hub"))


@pytest.mark.parametrize(
    "image, mirrored",
    [
        ("docker.io/vllm/vllm-openai:v0.33.0", f"{HOST}/docker-hub/vllm/vllm-openai:v0.33.0"),
        ("vllm/vllm-openai:v0.33.0", f"{HOST}/docker-hub/vllm/vllm-openai:v0.33.0"),
        ("ubuntu:22.04", f"{HOST}/docker-hub/library/ubuntu:22.04"),  # official images live under library/
        (
            "registry-1.docker.io/vllm/vllm-openai@sha256:" + "a" * 64,
            f"{HOST}/docker-hub/vllm/vllm-openai@sha256:" + "a" * 64,
        ),
        ("public.ecr.aws/aws-cli/aws-cli:2.27.0", f"{HOST}/ecr-public/aws-cli/aws-cli:2.27.0"),
        ("nvcr.io/nvidia/tritonserver:25.01-py3", "nvcr.io/nvidia/tritonserver:25.01-py3"),  # no rule: as it is
        ("localhost:5000/team/server:1.0", "localhost:5000/team/server:1.0"),
        (f"{HOST}/own/server:1", f"{HOST}/own/server:1"),
    ],
)
def test_images_go_through_the_rule_of_their_upstream(image, mirrored):
    assert BOTH.image(image) == mirrored


def test_without_a_docker_hub_rule_docker_hub_images_stay_as_they_are():
    public_only = mirror.Mirror(HOST, ("ecr-public",))
    assert public_only.image("vllm/vllm-openai:v0.33.0") == "vllm/vllm-openai:v0.33.0"
    assert public_only.image("public.ecr.aws/neuron/x:1") == f"{HOST}/ecr-public/neuron/x:1"


def test_the_nodes_may_fill_only_the_mirrors_repositories():
    arns = BOTH.repository_arns("aws", "us-east-1", "123456789012")
    assert arns == [
        "arn:aws:ecr:us-east-1:123456789012:repository/ecr-public/*",
        "arn:aws:ecr:us-east-1:123456789012:repository/docker-hub/*",
    ]
    [statement] = mirror.pull_through_policy(arns)["Statement"]  # type: ignore[index]
    assert statement["Action"] == ["ecr:BatchImportUpstreamImage", "ecr:CreateRepository"]
    assert statement["Resource"] == arns
