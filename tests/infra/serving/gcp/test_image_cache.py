"""Image references rewritten to the GKE Docker Hub cache: Docker Hub's (official ones under library/), never
another registry's."""

import pytest

from infra.serving.gcp.image_cache import DockerHubCache

CACHE = DockerHubCache("us-central1", "acme-prod")
HOST = "us-central1-docker.pkg.dev/acme-prod/docker-hub"


@pytest.mark.parametrize(
    ("image", "pulled"),
    [
        ("vllm/vllm-openai:v0.33.0", f"{HOST}/vllm/vllm-openai:v0.33.0"),
        ("docker.io/vllm/vllm-openai:v0.33.0", f"{HOST}/vllm/vllm-openai:v0.33.0"),
        ("registry-1.docker.io/library/python:3.11", f"{HOST}/library/python:3.11"),
        ("busybox:1.36", f"{HOST}/library/busybox:1.36"),
        ("busybox@sha256:" + "a" * 64, f"{HOST}/library/busybox@sha256:" + "a" * 64),
        ("public.ecr.aws/neuron/pytorch:2", "public.ecr.aws/neuron/pytorch:2"),
        ("us-docker.pkg.dev/acme/own/server:1", "us-docker.pkg.dev/acme/own/server:1"),
        ("localhost:5000/x:1", "localhost:5000/x:1"),
    ],
)
def test_only_docker_hub_images_are_rewritten(image, pulled):
    assert CACHE.image(image) == pulled
