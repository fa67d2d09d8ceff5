"""The serving side of a promotion: which model entry follows an alias, where the registry is, and the
conversion Jobs' role (the serving stack's converterRoleArn output)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.core.errors import InputError, Problem
from infra.kinds import load
from infra.ops.lifecycle.ports import StackOps
from infra.ops.promotion.recipes import RECIPES
from infra.serving.aws.config import ServingStackConfig
from infra.serving.aws.mirror import Mirror
from infra.serving.spec import ModelSpec
from infra.serving.variants import hardware_refusal


@dataclass(frozen=True)
class ServingTarget:
    stack: str
    config: ServingStackConfig
    bucket: str
    region: str
    follower: int | None  # index of models[] whose `alias` is the promoted alias, if any
    bucket_arn: str = ""
    key_arn: str = ""
    converter_role_arn: str | None = None  # None: the serving stack predates it, or was never deployed
    image_mirror: Mirror | None = None  # the serving stack's ECR pull-through cache (its imageMirror output)

    @property
    def version_path(self) -> str:
        return f"mlinfra:serving.models[{self.follower}].version"

    def served_variant(self) -> str | None:
        return None if self.follower is None else self.config.serving.models[self.follower].artefact_variant

    def served_version(self) -> str | None:
        return None if self.follower is None else self.config.serving.models[self.follower].version

    def variants_served(self, model: str) -> tuple[str, ...]:
        """The artefact variants the stack's entries of `model` serve (following an alias or pinned), in order."""
        found = [m.artefact_variant for m in self.config.serving.models if m.name == model]
        return tuple(dict.fromkeys(found))

    def server_for(self, variant: str, model: str, version: str) -> ModelSpec:
        """The model entry that will serve `variant` (its pool, image and engine settings): the stack's entry of
        the model when it serves this variant, following the alias or pinned to another version (it is how this
        one would be served: a Neuron artefact is compiled for its shape; a stack has one entry per model), else
        the defaults of a pool with its recipe's image: the recipe's pool when the stack declares it, else the
        first declared pool whose devices run the variant (the Jobs are built and checked there)."""
        entry = next((m for m in self.config.serving.models if m.name == model), None)
        if entry is not None and entry.artefact_variant == variant:
            return entry.model_copy(update={"version": version})
        recipe = RECIPES[variant]
        declared = self.config.serving.node_pools.declared()
        able = [pool for pool in declared if hardware_refusal(variant, pool) is None]
        return ModelSpec.model_validate(
            {
                "name": model,
                "version": version,
                "accelerator": recipe.accelerator if recipe.accelerator in declared or not able else able[0],
                "image": recipe.default_image,
                "variant": variant,
            }
        )


def serving_target(stacks: StackOps, stack: str, model: str, alias: str) -> ServingTarget:
    """The serving stack's config and the registry it reads (from the registry stack's outputs)."""
    flat = stacks.config(stack)
    if flat.get("mlinfra:kind") != "serving":
        raise InputError(
            Problem(
                "--stack",
                f"'{stack}' is a {flat.get('mlinfra:kind') or 'kind-less'} stack; promotion takes a serving stack",
            )
        )
    config = load(flat)  # bad config: InputError naming the key
    assert isinstance(config, ServingStackConfig)
    outputs: dict[str, Any] = stacks.outputs(config.registry_stack)
    if not outputs.get("bucketName"):
        raise InputError(
            Problem(
                "mlinfra:registryStack",
                f"stack '{config.registry_stack}' has no bucketName output: deploy the registry first",
            )
        )
    follower = next((i for i, m in enumerate(config.serving.models) if m.name == model and m.alias == alias), None)
    own = stacks.outputs(stack)
    mirror = own.get("imageMirror") or None
    return ServingTarget(
        stack,
        config,
        outputs["bucketName"],
        outputs.get("region") or flat.get("aws:region", ""),
        follower,
        outputs.get("bucketArn") or "",
        outputs.get("kmsKeyArn") or "",
        own.get("converterRoleArn") or None,
        Mirror(mirror["host"], tuple(mirror["upstreams"])) if mirror else None,
    )


def job_access(target: ServingTarget) -> tuple[str, str, str]:
    """(converter role, bucket ARN, key ARN) the conversion Jobs need; InputError naming what is missing."""
    if not target.converter_role_arn:
        raise InputError(
            Problem(
                "--stack",
                f"stack {target.stack} has no converterRoleArn output (the conversion "
                f"Jobs' role): run `pulumi up -s {target.stack}` first",
            )
        )
    if not (target.bucket_arn and target.key_arn):
        raise InputError(
            Problem(
                "mlinfra:registryStack",
                f"stack '{target.config.registry_stack}' has no bucketArn "
                "or kmsKeyArn output: update the registry stack first",
            )
        )
    return target.converter_role_arn, target.bucket_arn, target.key_arn
