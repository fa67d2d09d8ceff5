"""Reading pulumi-gcp inputs as rules need them (pure). Property names are the provider's wire names."""

from __future__ import annotations

from typing import Any

from infra.providers import tokens
from policies.model import Resource, is_unknown

GKE_CLUSTER = tokens.GCP_CONTAINER_CLUSTER
GKE_NODE_POOL = tokens.GCP_CONTAINER_NODE_POOL
PROJECT_IAM_POLICY = tokens.GCP_PROJECTS_IAM_POLICY
PROJECT_IAM_TYPES = (tokens.GCP_PROJECTS_IAM_MEMBER, tokens.GCP_PROJECTS_IAM_BINDING, tokens.GCP_PROJECTS_IAM_POLICY)


def flag(value: Any) -> bool | None:
    """A boolean as it arrives (true, or the string "true"); None when unset or unknown in the preview."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


def block(resource: Resource, *path: str) -> Any:
    """The nested object at `path`, {} when unset; UNKNOWN stays UNKNOWN (rules skip what a preview cannot know)."""
    value: Any = resource.props
    for key in path:
        if is_unknown(value):
            return value
        value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, list):  # the engine may send one-element lists for single nested blocks
            value = value[0] if value else None
    return {} if value is None else value


def node_config(resource: Resource) -> Any:
    return block(resource, "nodeConfig")
