"""Grants on the model registry, usable from the registry stack and from stacks that reference it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import pulumi
import pulumi_aws as aws

from infra.core.naming import slug
from infra.registry import layout as registry_layout


class RegistryAccess:
    """The bucket and key of a registry, and the least-privilege grants on its prefixes."""

    def __init__(self, bucket_arn: pulumi.Input[str], key_arn: pulumi.Input[str]):
        self.bucket_arn = pulumi.Output.from_input(bucket_arn)
        self.key_arn = pulumi.Output.from_input(key_arn)

    @classmethod
    def from_stack_reference(cls, ref: pulumi.StackReference) -> RegistryAccess:
        return cls(ref.require_output("bucketArn"), ref.require_output("kmsKeyArn"))

    def grant_read(
        self, role: aws.iam.Role, *prefixes: str, opts: pulumi.ResourceOptions | None = None
    ) -> aws.iam.RolePolicy:
        return self._grant("read", registry_layout.read_policy, role, prefixes, opts)

    def grant_write(
        self, role: aws.iam.Role, *prefixes: str, opts: pulumi.ResourceOptions | None = None
    ) -> aws.iam.RolePolicy:
        return self._grant("write", registry_layout.write_policy, role, prefixes, opts)

    def _grant(
        self,
        access: str,
        document: Callable,
        role: aws.iam.Role,
        prefixes: tuple[str, ...],
        opts: pulumi.ResourceOptions | None,
    ) -> aws.iam.RolePolicy:
        if not prefixes:
            raise ValueError(f"grant_{access} needs at least one registry prefix")
        # Check the prefixes now, at declaration, rather than inside an apply.
        for prefix in prefixes:
            problem = registry_layout.prefix_problem(prefix)
            if problem:
                raise ValueError(f"registry prefix {prefix!r}: {problem}")
        policy = pulumi.Output.all(self.bucket_arn, self.key_arn).apply(
            lambda arns: json.dumps(document(arns[0], arns[1], list(prefixes)))
        )
        joined = "|".join(prefixes)
        digest = hashlib.sha256(joined.encode()).hexdigest()[:6]
        name = f"{role.pulumi_resource_name}-registry-{access}-{slug(joined, 40)}-{digest}"
        return aws.iam.RolePolicy(
            name,
            role=role.id,
            policy=policy,
            opts=pulumi.ResourceOptions.merge(pulumi.ResourceOptions(parent=role), opts),
        )
