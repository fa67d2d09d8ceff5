"""Component type tokens follow `mlinfra:<domain>:<Noun>`. A component whose token changed keeps its former
token as an alias, so a stack deployed with the old one is updated in place on the next `pulumi up`: the engine
matches the old URNs (the component's and, through it, every child's) instead of replacing the resources."""

from __future__ import annotations

import pulumi


def aliased(opts: pulumi.ResourceOptions | None, *former_types: str) -> pulumi.ResourceOptions:
    """`opts` plus an alias for each type token the component had before (the parent and name are unchanged)."""
    return pulumi.ResourceOptions.merge(
        opts, pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=t) for t in former_types])
    )
