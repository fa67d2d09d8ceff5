"""An Artifact Registry remote repository proxying Docker Hub for the GKE nodes (infra/serving/gcp/image_cache.py
says why). The nodes' service account reads it with the project-wide roles/artifactregistry.reader it already
has (infra/serving/gcp/gke.py NODE_ROLES); a reader's pull is what makes the repository fetch from Docker Hub."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.serving.gcp.image_cache import CACHE_DAYS, REPOSITORY_ID, DockerHubCache


@dataclass(frozen=True)
class GkeImageMirrorArgs:
    project: str
    region: str
    labels: Mapping[str, str]


class GkeImageMirror(pulumi.ComponentResource):
    def __init__(self, name: str, args: GkeImageMirrorArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:serving:GkeImageMirror", name, None, opts)
        self.cache = DockerHubCache(args.region, args.project)
        self.repository = gcp.artifactregistry.Repository(
            f"{name}-docker-hub",
            repository_id=REPOSITORY_ID,
            location=args.region,
            format="DOCKER",
            mode="REMOTE_REPOSITORY",
            description="Docker Hub, cached for the serving nodes",
            remote_repository_config=gcp.artifactregistry.RepositoryRemoteRepositoryConfigArgs(
                description="Docker Hub",
                docker_repository=gcp.artifactregistry.RepositoryRemoteRepositoryConfigDockerRepositoryArgs(
                    public_repository="DOCKER_HUB"
                ),
            ),
            # What was pulled is kept for CACHE_DAYS, then pulled again on the next request: storage stays bounded.
            cleanup_policies=[
                gcp.artifactregistry.RepositoryCleanupPolicyArgs(
                    id="expire-cached",
                    action="DELETE",
                    condition=gcp.artifactregistry.RepositoryCleanupPolicyConditionArgs(
                        older_than=f"{CACHE_DAYS * 86400}s"
                    ),
                )
            ],
            labels=dict(args.labels),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"prefix": self.cache.prefix})
