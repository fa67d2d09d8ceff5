"""Images through the account's own registry: ECR pull-through cache rules for ECR Public and Docker Hub, and
the image references rewritten to them (pure).

Nodes then pull from ECR in their own region (with the node role, logged in CloudTrail, no Docker Hub rate
limit on the NAT gateways' two addresses, and the image kept if the upstream removes it). Docker Hub as an
upstream needs credentials: a Secrets Manager secret whose name starts with `ecr-pullthroughcache/`
(ECR's "Creating a pull through cache rule" documentation).
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.serving.images import docker_hub_path, split_reference

CREDENTIAL_SECRET_PREFIX = "ecr-pullthroughcache/"


@dataclass(frozen=True)
class Upstream:
    prefix: str  # the ECR repository prefix of the rule
    url: str  # the upstream registry ECR pulls from
    needs_credential: bool


ECR_PUBLIC = Upstream("ecr-public", "public.ecr.aws", needs_credential=False)
DOCKER_HUB = Upstream("docker-hub", "registry-1.docker.io", needs_credential=True)


def upstream_of(image: str) -> tuple[Upstream, str] | None:
    """The rule an image would come through, and its path under the rule's prefix; None for other registries."""
    host, rest = split_reference(image)
    if host == ECR_PUBLIC.url:
        return ECR_PUBLIC, rest
    path = docker_hub_path(image)
    return (DOCKER_HUB, path) if path is not None else None


def registry_host(account_id: str, region: str, dns_suffix: str = "amazonaws.com") -> str:
    return f"{account_id}.dkr.ecr.{region}.{dns_suffix}"


@dataclass(frozen=True)
class Mirror:
    """Where images come from: the account's ECR (`host`) for the upstreams it has rules for."""

    host: str
    upstreams: tuple[str, ...]  # prefixes of the rules the stack declares

    def image(self, image: str) -> str:
        found = upstream_of(image)
        if found is None or found[0].prefix not in self.upstreams:
            return image
        upstream, path = found
        return f"{self.host}/{upstream.prefix}/{path}"

    def repository_arns(self, partition: str, region: str, account_id: str) -> list[str]:
        return [f"arn:{partition}:ecr:{region}:{account_id}:repository/{prefix}/*" for prefix in self.upstreams]


def pulled(mirror: Mirror | None, image: str) -> str:
    """The reference a node pulls: through the mirror when there is one."""
    return mirror.image(image) if mirror else image


def pull_through_policy(repository_arns: list[str]) -> dict[str, object]:
    """What the nodes need beyond read-only ECR to pull through a cache rule: the first pull of an image
    creates its repository and imports it from the upstream."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "PullThroughCache",
                "Effect": "Allow",
                "Action": ["ecr:BatchImportUpstreamImage", "ecr:CreateRepository"],
                "Resource": repository_arns,
            }
        ],
    }
