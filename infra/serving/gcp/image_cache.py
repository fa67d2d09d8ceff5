"""Docker Hub images through the project's own Artifact Registry on GKE (pure): a remote repository in the
stack's region proxies Docker Hub and keeps what it pulled, and the image references are rewritten to it.

Nodes then pull from Artifact Registry in their own region, free of egress within it (Artifact Registry
pricing: data moving within the same location is free; storage $0.10 per GB-month past 0.5 GB), with the node
service account, instead of anonymously from Docker Hub through Cloud NAT's few addresses, where Docker Hub's
anonymous pull limit is counted per address and every node's cold start pulls the multi-GB image again. Other
registries (ECR Public, your own) are pulled as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.serving.images import docker_hub_path

REPOSITORY_ID = "docker-hub"  # one per project and region: the stack's
CACHE_DAYS = 30  # a cached version older than this is deleted (pulled again from Docker Hub when next asked for)


def registry_host(region: str) -> str:
    return f"{region}-docker.pkg.dev"


@dataclass(frozen=True)
class DockerHubCache:
    region: str
    project: str

    @property
    def prefix(self) -> str:
        return f"{registry_host(self.region)}/{self.project}/{REPOSITORY_ID}"

    def image(self, image: str) -> str:
        path = docker_hub_path(image)
        return image if path is None else f"{self.prefix}/{path}"
