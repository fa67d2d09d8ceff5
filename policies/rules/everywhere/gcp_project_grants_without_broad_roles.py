"""No project-level IAM grant of the stack gives a basic role (owner, editor), a whole-service admin role
(Cloud Storage, IAM) or anything to the public: mlinfra's service accounts get predefined roles on the one
bucket, topic or service they use, or a project role under an IAM condition, and one project-wide
`roles/storage.admin` reaches every bucket of the project, the registry's mirror included.

Roles and why each is refused (Google Cloud IAM basic and predefined roles reference, as of 2026-11):
owner/editor hold nearly every permission of the project; storage.admin every bucket and its IAM policy;
iam.securityAdmin, resourcemanager.projectIamAdmin and iam.serviceAccountAdmin let the holder grant itself
anything; iam.serviceAccountUser and iam.serviceAccountTokenCreator let it act as any service account."""

from __future__ import annotations

import json

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.aws import as_list
from policies.readers.gcp import PROJECT_IAM_POLICY, PROJECT_IAM_TYPES
from policies.readers.gcs import PUBLIC_MEMBERS

NAME = "gcp-project-grants-without-broad-roles"
BROAD_ROLES = frozenset(
    {
        "roles/owner",
        "roles/editor",
        "roles/storage.admin",
        "roles/iam.securityAdmin",
        "roles/resourcemanager.projectIamAdmin",
        "roles/iam.serviceAccountAdmin",
        "roles/iam.serviceAccountUser",
        "roles/iam.serviceAccountTokenCreator",
    }
)


def grants(resource: Resource) -> list[tuple[object, list[object]]]:
    """(role, members) of a project IAM member or binding, or of every binding of a whole project policy (its
    policyData JSON); values a preview cannot know are left out."""
    if resource.type == PROJECT_IAM_POLICY:
        data = resource.get("policyData")
        try:
            document = json.loads(data) if isinstance(data, str) else None
        except ValueError:
            document = None
        bindings = document.get("bindings") if isinstance(document, dict) else None
        return [
            (b.get("role"), [m for m in as_list(b.get("members")) if not is_unknown(m)])
            for b in as_list(bindings)
            if isinstance(b, dict)
        ]
    members = resource.get("members")
    members = members if isinstance(members, list) else [resource.get("member")]
    return [(resource.get("role"), [m for m in members if not is_unknown(m)])]


def check(resource: Resource) -> list[str]:
    problems = []
    for role, members in grants(resource):
        if isinstance(role, str) and role in BROAD_ROLES:
            problems.append(
                f"{role} is granted on the whole project; grant a predefined role on the one resource it is for "
                "(a bucket, a topic, a service account), or a narrower role under an IAM condition"
            )
        problems += [
            f"{role} is granted on the project to {m}; grant it to the service accounts that need it instead"
            for m in members
            if m in PUBLIC_MEMBERS
        ]
    return problems


RULE = ResourceRule(
    NAME,
    "Project IAM grants give no basic, storage-admin or IAM-admin role, and nothing to the public.",
    "mandatory",
    PROJECT_IAM_TYPES,
    check,
)
