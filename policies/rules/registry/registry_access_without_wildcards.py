"""IAM documents grant named actions on named resources: no `*` actions, resources or principals on the
registry's S3 bucket and KMS key (nor `*` actions anywhere)."""

from __future__ import annotations

from policies.model import Resource, ResourceRule
from policies.readers.aws import (
    BUCKET_POLICY,
    IAM_POLICY,
    IAM_ROLE,
    IAM_ROLE_POLICY,
    iam_documents,
    service_of,
    statements,
)

NAME = "registry-access-without-wildcards"
_REGISTRY_SERVICES = ("s3", "kms")
_FIX = "RegistryAccess.grant_read/grant_write name each action and prefix"


def check(resource: Resource) -> list[str]:
    problems = []
    for where, document in iam_documents(resource):
        for st in statements(document):
            if st.effect != "Allow":
                continue
            registry_actions = [a for a in st.actions if a == "*" or service_of(a) in _REGISTRY_SERVICES]
            for action in registry_actions:
                if "*" in action:
                    problems.append(f"{where} statement {st.sid} allows '{action}'; list the actions it needs ({_FIX})")
            if registry_actions:
                for arn in st.resources:
                    if arn == "*" or arn in ("arn:aws:s3:::*", "arn:aws:kms:*"):
                        problems.append(
                            f"{where} statement {st.sid} allows {', '.join(registry_actions)} on "
                            f"resource '{arn}'; name the registry bucket, its prefixes and its key ({_FIX})"
                        )
            principal = st.raw.get("Principal")
            if principal == "*" or (isinstance(principal, dict) and "*" in _flat(principal.get("AWS"))):
                problems.append(f"{where} statement {st.sid} allows principal '*' (anyone); allow named roles only")
    return problems


def _flat(value: object) -> list:
    return value if isinstance(value, list) else [value]


RULE = ResourceRule(
    NAME,
    "IAM documents grant named actions on named registry resources, never '*'.",
    "mandatory",
    (IAM_ROLE_POLICY, IAM_POLICY, IAM_ROLE, BUCKET_POLICY),
    check,
)
