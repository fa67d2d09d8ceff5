"""The registry bucket refuses requests without TLS (a bucket policy denying aws:SecureTransport false)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.core.shapes import dict_at
from policies.model import Finding, Stack, StackRule, is_unknown
from policies.readers.aws import BUCKET_POLICY, attached_to_bucket, policy_document, registry_buckets, statements

NAME = "registry-bucket-tls-only"


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    findings = []
    for bucket in registry_buckets(stack):
        policies = attached_to_bucket(stack, bucket, BUCKET_POLICY)
        if any(is_unknown(p.get("policy")) for p in policies):
            continue
        if not any(_denies_plain_http(p.get("policy")) for p in policies):
            where = policies[0].urn if policies else bucket.urn
            findings.append(
                Finding(
                    where,
                    (
                        f"registry bucket {bucket.label} has no policy statement denying requests without TLS; add "
                        "Deny s3:* for Principal '*' on the bucket and its objects when aws:SecureTransport is false"
                    ),
                )
            )
    return findings


def _denies_plain_http(policy: Any) -> bool:
    for st in statements(policy_document(policy)):
        condition = dict_at(st.raw, "Condition")
        secure = (condition.get("Bool") or {}).get("aws:SecureTransport")
        if (
            st.effect == "Deny"
            and str(secure).lower() == "false"
            and _everyone(st.raw.get("Principal"))
            and any(a in ("s3:*", "*") for a in st.actions)
        ):
            return True
    return False


def _everyone(principal: Any) -> bool:
    return principal == "*" or (isinstance(principal, dict) and principal.get("AWS") == "*")


RULE = StackRule(NAME, "The registry bucket policy denies requests without TLS.", "mandatory", check)
