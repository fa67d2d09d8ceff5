"""Container image references as docker reads them, for the mirrors of both clouds (pure): the ECR pull-through
cache (aws/mirror.py) and the Artifact Registry remote repository (gcp/image_cache.py)."""

from __future__ import annotations

from typing import Protocol

DOCKER_HUB_HOSTS = ("docker.io", "index.docker.io", "registry-1.docker.io")


class ImageSource(Protocol):
    """Where a node pulls an image from: the reference it is given for the one a model entry names."""

    def image(self, image: str) -> str: ...


def split_reference(image: str) -> tuple[str | None, str]:
    """(registry host or None, the rest) as docker reads a reference: the first component is a host when it
    has a dot or a port, or is localhost."""
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return None, image


def pin(image: str) -> tuple[str | None, str | None]:
    """(tag, digest) a reference names, each None when absent, as docker reads it (a registry's port is not a
    tag); with neither, docker pulls :latest."""
    rest, _, digest = image.partition("@")
    last = split_reference(rest)[1].rsplit("/", 1)[-1]
    tag = last.rpartition(":")[2] if ":" in last else ""
    return (tag or None), (digest or None)


def docker_hub_path(image: str) -> str | None:
    """The repository path of a Docker Hub image (official images under library/), None for other registries."""
    host, rest = split_reference(image)
    if host is not None and host not in DOCKER_HUB_HOSTS:
        return None
    return rest if "/" in rest.split(":")[0].split("@")[0] else f"library/{rest}"
