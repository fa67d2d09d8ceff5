"""The GCP training nodes' own service account, with least privilege: read objects under datasets/ and write
new objects under checkpoints/<run-id>/ and runs/<run-id>/ of the data bucket (IAM conditions on the object
name), plus writing logs and metrics. No project-wide storage role, no keys."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.aliases import aliased

PROJECT_ROLES = ("roles/logging.logWriter", "roles/monitoring.metricWriter")


def object_prefix_condition(bucket: str, prefixes: tuple[str, ...]) -> str:
    """A CEL expression true for objects under any of `prefixes` in `bucket`."""
    return " || ".join(f"resource.name.startsWith('projects/_/buckets/{bucket}/objects/{p}')" for p in prefixes)


def prefix_grant(
    resource_name: str,
    bucket: str,
    role: str,
    member: pulumi.Input[str],
    prefixes: tuple[str, ...],
    title: str,
    opts: pulumi.ResourceOptions,
) -> gcp.storage.BucketIAMMember:
    """`role` on `bucket`'s objects under `prefixes` only (an IAM condition on the object name)."""
    return gcp.storage.BucketIAMMember(
        resource_name,
        bucket=bucket,
        role=role,
        member=member,
        condition=gcp.storage.BucketIAMMemberConditionArgs(
            title=title, expression=object_prefix_condition(bucket, prefixes)
        ),
        opts=opts,
    )


@dataclass(frozen=True)
class GcpNodeAccountArgs:
    account_id: str
    project: str
    bucket: str
    read_prefixes: tuple[str, ...]
    write_prefixes: tuple[str, ...]


class GcpNodeAccount(pulumi.ComponentResource):
    def __init__(self, name: str, args: GcpNodeAccountArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(
            "mlinfra:training:GcpNodeAccount", name, None, aliased(opts, "mlinfra:gcp_node_account:GcpNodeAccount")
        )
        child = pulumi.ResourceOptions(parent=self)
        self.account = gcp.serviceaccount.Account(
            f"{name}-sa",
            account_id=args.account_id,
            display_name=f"mlinfra training nodes {args.account_id}",
            opts=child,
        )
        member = self.account.email.apply(lambda e: f"serviceAccount:{e}")
        grants = {
            "read": ("roles/storage.objectViewer", args.read_prefixes + args.write_prefixes),
            "write": ("roles/storage.objectCreator", args.write_prefixes),
        }
        for what, (role, prefixes) in grants.items():
            prefix_grant(
                f"{name}-{what}",
                args.bucket,
                role,
                member,
                prefixes,
                f"mlinfra-{what}-run-prefixes",
                pulumi.ResourceOptions(parent=self.account),
            )
        for role in PROJECT_ROLES:
            gcp.projects.IAMMember(
                f"{name}-{role.rsplit('/', 1)[-1].replace('.', '-').lower()}",
                project=args.project,
                role=role,
                member=member,
                opts=pulumi.ResourceOptions(parent=self.account),
            )
        self.register_outputs({"email": self.account.email})
