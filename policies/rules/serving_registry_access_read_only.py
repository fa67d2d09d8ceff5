"""Serving reads the registry and never writes it: a serving role's IAM documents allow only S3
Get*/List* and KMS Decrypt/DescribeKey."""
from __future__ import annotations

from typing import Any, Mapping

from policies.aws import IAM_POLICY, IAM_ROLE, IAM_ROLE_POLICY, iam_documents, role_in_stack, role_of, service_of, statements
from policies.model import Finding, Resource, Stack, StackRule

NAME = "serving-registry-access-read-only"
_KMS_READ = ("kms:decrypt", "kms:describekey")


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    findings = []
    for resource in stack.of_type(IAM_ROLE_POLICY, IAM_POLICY, IAM_ROLE):
        if _role(resource, stack) != "serving":
            continue
        for where, document in iam_documents(resource):
            writes = sorted({a for st in statements(document) if st.effect == "Allow" for a in st.actions if _writes(a)})
            if writes:
                findings.append(Finding(resource.urn, (
                    f"serving {where} of {resource.label} allows {', '.join(writes)}; serving only reads "
                    "models/: grant with RegistryAccess.grant_read(role, 'models/...')")))
    return findings


def _role(resource: Resource, stack: Stack) -> Any:
    for role in stack.linked(resource, "role"):
        if role_of(role):
            return role_of(role)
    return role_in_stack(resource, stack)


def _writes(action: str) -> bool:
    service, lowered = service_of(action), action.lower()
    if action == "*":
        return True
    if service == "s3":
        verb = lowered.split(":", 1)[1]
        return verb == "*" or not verb.startswith(("get", "list"))
    if service == "kms":
        return lowered not in _KMS_READ
    return False


RULE = StackRule(NAME, "Serving roles have read-only access to the registry.", "mandatory", check)
