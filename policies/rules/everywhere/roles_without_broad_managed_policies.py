"""No role of the project holds an AWS managed policy that grants a whole service or everything: mlinfra's
roles get scoped grants (the registry's per-prefix documents, the guard's run-tag conditions), and one
AdministratorAccess or AmazonS3FullAccess attachment undoes every one of them."""

from __future__ import annotations

from policies.model import Resource, ResourceRule
from policies.readers.aws import IAM_ROLE, IAM_ROLE_POLICY_ATTACHMENT, as_list

NAME = "roles-without-broad-managed-policies"
BROAD = frozenset(
    {
        "AdministratorAccess",
        "PowerUserAccess",
        "IAMFullAccess",
        "AmazonS3FullAccess",
        "AmazonEC2FullAccess",
        "AmazonFSxFullAccess",
        "AWSLambda_FullAccess",
        "AWSKeyManagementServicePowerUser",
        "AmazonEKSServicePolicy",
    }
)


def check(resource: Resource) -> list[str]:
    arns = (
        [resource.get("policyArn")]
        if resource.type == IAM_ROLE_POLICY_ATTACHMENT
        else as_list(resource.get("managedPolicyArns"))
    )
    return [
        f"{arn} grants far more than this role needs; attach a scoped policy instead"
        for arn in arns
        if isinstance(arn, str)
        and arn.startswith("arn:")
        and ":iam::aws:policy/" in arn
        and arn.rsplit("/", 1)[-1] in BROAD
    ]


RULE = ResourceRule(
    NAME,
    "Roles hold no AWS managed policy that grants a whole service or everything.",
    "mandatory",
    (IAM_ROLE, IAM_ROLE_POLICY_ATTACHMENT),
    check,
)
