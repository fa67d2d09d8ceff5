"""Serving reads the registry and never writes it: a serving role's IAM documents allow only S3
Get*/List* and KMS Decrypt/DescribeKey. One exception, by name: the model converter (the role bound to
the `model-converter` service account, which turns checkpoints into served formats) may add objects
under models/, and never delete."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.providers import tokens
from policies.model import Finding, Resource, Stack, StackRule
from policies.readers.aws import (
    IAM_POLICY,
    IAM_ROLE,
    IAM_ROLE_POLICY,
    iam_documents,
    role_in_stack,
    role_of,
    s3_object_key,
    s3_writes,
    service_of,
    statements,
)

NAME = "serving-registry-access-read-only"
_KMS_READ = ("kms:decrypt", "kms:describekey")
CONVERTER_SERVICE_ACCOUNT = "model-converter"
POD_IDENTITY = tokens.AWS_EKS_POD_IDENTITY_ASSOCIATION


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    findings = []
    converters = _converter_roles(stack)
    for resource in stack.of_type(IAM_ROLE_POLICY, IAM_POLICY, IAM_ROLE):
        if _role(resource, stack) != "serving":
            continue
        converter = resource.urn in converters or any(r.urn in converters for r in stack.linked(resource, "role"))
        for where, document in iam_documents(resource):
            allowed = [st for st in statements(document) if st.effect == "Allow"]
            if converter:
                writes = sorted(
                    {a for st in allowed if not _models_only(st) for a in st.actions if _writes(a)}
                    | {a for st in allowed for a in st.actions if _deletes(a)}
                )
                if writes:
                    findings.append(
                        Finding(
                            resource.urn,
                            (
                                f"model converter {where} of {resource.label} allows {', '.join(writes)} "
                                f"outside models/ "
                                "or deletes; the converter only adds objects: grant with "
                                "RegistryAccess.grant_write(role, 'models/')"
                            ),
                        )
                    )
                continue
            writes = sorted({a for st in allowed for a in st.actions if _writes(a)})
            if writes:
                findings.append(
                    Finding(
                        resource.urn,
                        (
                            f"serving {where} of {resource.label} allows {', '.join(writes)}; serving only reads "
                            "models/: grant with RegistryAccess.grant_read(role, 'models/...')"
                        ),
                    )
                )
    return findings


def _converter_roles(stack: Stack) -> set[str]:
    """URNs of roles bound to the model converter's service account through EKS Pod Identity."""
    return {
        role.urn
        for association in stack.of_type(POD_IDENTITY)
        if association.get("serviceAccount") == CONVERTER_SERVICE_ACCOUNT
        for role in stack.linked(association, "roleArn")
    }


def _models_only(statement: Any) -> bool:
    """KMS data keys, or S3 statements on object ARNs under the bucket's models/ only."""
    if all(service_of(a) == "kms" for a in statement.actions):
        return True
    return bool(statement.resources) and all(s3_object_key(r).startswith("models/") for r in statement.resources)


def _deletes(action: str) -> bool:
    lowered = action.lower()
    return action == "*" or lowered in ("s3:*",) or lowered.startswith(("s3:delete", "s3:putlifecycle", "s3:putbucket"))


def _role(resource: Resource, stack: Stack) -> Any:
    for role in stack.linked(resource, "role"):
        if role_of(role):
            return role_of(role)
    return role_in_stack(resource, stack)


def _writes(action: str) -> bool:
    return s3_writes(action) or (service_of(action) == "kms" and action.lower() not in _KMS_READ)


RULE = StackRule(NAME, "Serving roles have read-only access to the registry.", "mandatory", check)
