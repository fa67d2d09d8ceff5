"""Stack kinds: each module composes components for one `mlinfra:kind`."""
from __future__ import annotations

import pulumi

from infra.kinds import load
from infra.kinds import cloud_of
from infra.core.source import runtime_values
from infra.core.errors import InputError


def build() -> None:
    """Entry point of the Pulumi program: validate all config first, then declare the stack's resources."""
    from stacks.aws import registry, serving, training
    from stacks.gcp import registry as registry_gcp, serving as serving_gcp, training as training_gcp

    # One builder per (kind, cloud); the config has already refused combinations that do not exist.
    builders = {("registry", "aws"): registry.build, ("training", "aws"): training.build,
                ("serving", "aws"): serving.build, ("serving", "gcp"): serving_gcp.build,
                ("registry", "gcp"): registry_gcp.build, ("training", "gcp"): training_gcp.build}
    try:
        config = load(runtime_values())
        # Builders make every decision (and raise InputError) before declaring their first resource.
        builders[(config.kind, cloud_of(config))](config)
    except InputError as error:
        # RunError ends the program with this message only: no traceback, nothing declared.
        raise pulumi.RunError(f"invalid mlinfra config:\n{error}") from None
