"""A role's trust policy names who may assume it: an Allow to every principal (`*`) with no condition that
pins an account, organisation, role or resource lets anyone on AWS assume the role and act with its grants."""

from __future__ import annotations

from policies.model import Resource, ResourceRule
from policies.readers.aws import IAM_ROLE, open_to_anyone, policy_document, statements

NAME = "trust-policies-name-their-principals"


def check(resource: Resource) -> list[str]:
    return [
        f"assumeRolePolicy statement {st.sid} lets any principal assume the role; name the service or account that "
        "may, or add a condition on aws:SourceAccount, aws:SourceArn or aws:PrincipalAccount"
        for st in statements(policy_document(resource.get("assumeRolePolicy")))
        if open_to_anyone(st)
    ]


RULE = ResourceRule(NAME, "IAM roles are assumable only by named principals.", "mandatory", (IAM_ROLE,), check)
