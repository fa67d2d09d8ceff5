"""A stack's reference to its registry stack (`mlinfra:registryStack`), checked in the config tier: a bare
name must be a registry stack of this project, so a typo is exit 2 naming the key, not a `KeyError` on a
missing output in the middle of a preview. A fully qualified `org/project/stack` reference is another
project's: only the deploy can read it."""

from __future__ import annotations

from infra.core.errors import InputError, Problem

KEY = "mlinfra:registryStack"


def registry_stack_findings(registry_stack: str, cloud: str = "aws") -> list[Problem]:
    """None when `registry_stack` is a `cloud` registry stack of this project (or another project's)."""
    from infra.core.project import load_project, stack_config

    if "/" in registry_stack:
        return []
    project = load_project()
    registries = []
    for name in project.stacks():
        try:
            config = stack_config(project, name)
            if config.get("mlinfra:kind") == "registry" and config.get("mlinfra:cloud", "aws") == cloud:
                registries.append(name)
        except InputError:
            continue  # an unreadable stack file is reported when it is asked for by name
    if registry_stack in registries:
        return []
    what = f"not a registry stack on {cloud}" if registry_stack in project.stacks() else "not a stack of this project"
    known = ", ".join(registries) or "none in stacks/"
    return [
        Problem(
            KEY,
            f"{registry_stack!r} is {what}; {cloud} registry stacks here: {known} (or a fully qualified "
            "org/project/stack reference to another project's registry)",
        )
    ]
