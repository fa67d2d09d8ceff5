"""EKS envelope-encrypts Kubernetes secrets with a KMS key."""

from __future__ import annotations

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.aws import EKS_CLUSTER, as_list

NAME = "eks-secrets-encrypted"


def check(resource: Resource) -> list[str]:
    config = resource.get("encryptionConfig")
    if is_unknown(config):
        return []
    if not isinstance(config, dict):
        return [
            "encryptionConfig is not set, so Kubernetes secrets are not envelope-encrypted; set "
            "encryptionConfig with resources ['secrets'] and a KMS key as provider.keyArn"
        ]
    if "secrets" not in as_list(config.get("resources")):
        return ["encryptionConfig.resources does not include 'secrets'; set it to ['secrets']"]
    return []


RULE = ResourceRule(NAME, "EKS clusters encrypt Kubernetes secrets with KMS.", "mandatory", (EKS_CLUSTER,), check)
