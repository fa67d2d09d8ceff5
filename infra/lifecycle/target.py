"""Which stacks the lifecycle commands take: training stacks with a file in the project's stacks/."""
from __future__ import annotations

from typing import Any

from infra.errors import InputError, Problem
from infra.offline.project import Project, stack_config


def training_stacks(project: Project) -> list[str]:
    names = []
    for name in project.stacks():
        try:
            if stack_config(project, name).get("mlinfra:kind") == "training":
                names.append(name)
        except InputError:
            continue  # an unreadable file is reported when it is asked for by name
    return names


def training_stack_config(project: Project, stack: str) -> dict[str, Any]:
    """The stack file's config; InputError naming `--stack` unless it is a training stack of the project."""
    config = stack_config(project, stack)  # an unknown stack: InputError on --stack, with the known ones
    kind = config.get("mlinfra:kind")
    if kind != "training":
        allowed = ", ".join(training_stacks(project)) or "none in stacks/"
        raise InputError(Problem("--stack", f"'{stack}' is a {kind or 'kind-less'} stack; "
                                            f"this command takes a training stack: {allowed}"))
    return config
