"""Bucket and key policies grant nothing to everyone: an Allow to `*` (or NotPrincipal) without a condition that
pins an account, organisation, role, resource or network opens the registry's objects, or the key that
decrypts them, to anyone on AWS. (Deny statements to `*`, such as TLS-only, are what they should be.)"""

from __future__ import annotations

from policies.model import Resource, ResourceRule
from policies.readers.aws import BUCKET_POLICY, KMS_KEY, open_to_anyone, policy_document, statements

NAME = "resource-policies-grant-no-one-outside"


def check(resource: Resource) -> list[str]:
    what = "bucket policy" if resource.type == BUCKET_POLICY else "key policy"
    return [
        f"{what} statement {st.sid} allows {', '.join(st.actions) or 'its actions'} to any principal; grant a named "
        "role or account, or add a condition on aws:PrincipalAccount, aws:SourceArn or kms:CallerAccount"
        for st in statements(policy_document(resource.get("policy")))
        if open_to_anyone(st)
    ]


RULE = ResourceRule(
    NAME, "Bucket and KMS key policies allow nothing to anyone outside.", "mandatory", (BUCKET_POLICY, KMS_KEY), check
)
