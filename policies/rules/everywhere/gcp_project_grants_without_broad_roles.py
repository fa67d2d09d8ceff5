"""No project-level IAM grant of the stack gives a basic role (owner, editor), a whole-service admin role
(Cloud Storage, IAM) or anything to the public: mlinfra's service accounts get predefined roles on the one
bucket, topic or service they use, or a project role under an IAM condition, and one project-wide
`roles/storage.admin` reaches every bucket of the project, the registry's mirror included.

Roles and why each is refused (Google Cloud IAM basic and predefined roles reference, as of 2026-11):
owner/editor hold nearly every permission of the project; storage.admin every bucket and its IAM policy;
iam.securityAdmin, resourcemanager.projectIamAdmin and iam.serviceAccountAdmin let the holder grant itself
anything; iam.serviceAccountUser and iam.serviceAccountTokenCreator let it act as any service account."""

from __future__ import annotations

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.gcp import PROJECT_IAM_TYPES
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


def check(resource: Resource) -> list[str]:
    role = resource.get("role")
    members = resource.get("members")
    members = [m for m in (members if isinstance(members, list) else [resource.get("member")]) if not is_unknown(m)]
    problems = []
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
