"""A stack's reference to its registry stack (`mlinfra:registryStack`), checked in the config tier: a bare
name must be a registry stack of this project, so a typo is exit 2 naming the key, not a `KeyError` on a
missing output in the middle of a preview. A fully qualified `org/project/stack` reference is another
project's: only the deploy can read it."""

from __future__ import annotations

from infra.core.errors import Problem

KEY = "mlinfra:registryStack"


def registry_stack_findings(registry_stack: str, cloud: str = "aws") -> list[Problem]:
    """None when `registry_stack` is a `cloud` registry stack of this project (or another project's). Only the
    named stack's file is read, unless it is not one: then the message lists those that are."""
    from infra.core.project import load_project, stack_is, stack_reference_problem, stacks_of_kind

    problem = stack_reference_problem(registry_stack)
    if problem:
        return [Problem(KEY, problem)]
    if "/" in registry_stack:
        return []
    project = load_project()
    if registry_stack in project.stacks() and stack_is(project, registry_stack, "registry", cloud):
        return []
    what = f"not a registry stack on {cloud}" if registry_stack in project.stacks() else "not a stack of this project"
    known = ", ".join(stacks_of_kind(project, "registry", cloud)) or "none in stacks/"
    return [
        Problem(
            KEY,
            f"{registry_stack!r} is {what}; {cloud} registry stacks here: {known} (or a fully qualified "
            "org/project/stack reference to another project's registry)",
        )
    ]
