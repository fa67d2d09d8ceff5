"""Meaning checks of the registry's mirror on GCP (second tier): findings name the key."""

from __future__ import annotations

from infra.core.errors import Problem
from infra.registry.gcp.config import MirrorSpec

P = "mlinfra:registry.mirror."


def mirror_findings(spec: MirrorSpec) -> list[Problem]:
    """The source must be an AWS registry stack. Checked from its stack file when the project has it (a fully
    qualified org/project/stack reference is checked when the program reads its outputs instead)."""
    from infra.core.project import load_project, stack_config, stack_reference_problem

    project = load_project()
    name = spec.source_stack
    problem = stack_reference_problem(name)
    if problem:
        return [Problem(P + "sourceStack", problem)]
    if "/" in name:
        return []
    if name not in project.stacks():
        return [
            Problem(
                P + "sourceStack",
                f"no stack {name!r} in {project.config_dir.name}/; name the AWS registry "
                f"stack (one of: {', '.join(sorted(project.stacks()))})",
            )
        ]
    config = stack_config(project, name)
    kind, cloud = config.get("mlinfra:kind"), config.get("mlinfra:cloud", "aws")
    if kind != "registry" or cloud != "aws":
        return [
            Problem(
                P + "sourceStack",
                f"stack {name!r} is a {kind} stack on {cloud}; the mirror copies from the "
                "AWS registry stack (mlinfra:kind registry, cloud aws)",
            )
        ]
    return []
