"""What `promote` prints before it starts anything (and all `promote --dry-run` does): the Jobs it would create,
with their hardware, image, sizes and registry access, and what it writes after them."""

from __future__ import annotations

from infra.ops.promotion import evaluation, registry, sizing
from infra.ops.promotion import jobs as job_objects
from infra.ops.promotion.quality import Budget
from infra.ops.promotion.recipes import RECIPES, step_image
from infra.ops.promotion.request import Promotion
from infra.ops.promotion.serving import ServingTarget
from infra.ops.runtime import Runtime
from infra.registry import layout as registry_layout
from infra.serving import engine
from infra.serving.aws import converter_access as access
from infra.serving.aws.mirror import pulled
from infra.serving.servers import PROFILES
from infra.serving.spec import ModelSpec
from infra.serving.variants import VARIANTS


def print_plan(
    rt: Runtime,
    req: Promotion,
    target: ServingTarget,
    checkpoint: registry.Checkpoint,
    current: str | None,
    sizes: dict[str, sizing.Resources],
    servers: dict[str, ModelSpec],
) -> None:
    ns = target.config.serving.namespace
    gated = (
        " and each quantised one passed its quality gate" if any(VARIANTS[v].quantised for v in req.variants) else ""
    )
    rt.say(f"promote run {req.run_id} -> {req.model} version {req.version} (registry s3://{target.bucket})")
    rt.say(
        f"  checkpoint: {checkpoint.prefix} ({checkpoint.objects} objects, {checkpoint.size:,} bytes); "
        f"runs/{req.run_id}/_SUCCESS present"
    )
    for variant in req.variants:
        pool = servers[variant].accelerator
        prefix = job_objects.artefact_prefix(req.model, req.version, variant)
        size = sizes[variant]
        settings = engine.engine_settings(servers[variant]).keywords()
        image = served = pulled(target.image_mirror, servers[variant].image)
        # promote has refused a converter variant without its image (gate.check_converter) before the plan
        converter = target.config.serving.converter_image
        built_in = pulled(target.image_mirror, step_image(variant, servers[variant].image, converter))
        if RECIPES[variant].converter:
            image = f"{built_in} (llm-compressor), then {served} (check)"
        calibration = f" + {req.calibration} (calibration data)" if VARIANTS[variant].calibrated else ""
        rt.say(
            f"  job {ns}/{job_objects.job_name(req.model, req.version, variant)}: {variant} on {pool} "
            f"({PROFILES[pool].resource}: {size.devices}, cpu {size.cpu:g}, memory "
            f"{size.memory_gib:g}Gi, disk {size.disk_gib:g}Gi), image {image}; reads "
            f"{checkpoint.prefix}{calibration}, writes {prefix} + {prefix}{registry.MANIFEST}"
        )
        rt.say(
            "    built and load-checked for the server's engine: "
            + ", ".join(f"{k}={v}" for k, v in settings.items() if k != "additional_config")
        )
        if VARIANTS[variant].quantised and req.evaluation is not None:
            _evaluation_line(
                rt,
                req,
                ns,
                checkpoint,
                servers[variant],
                variant,
                f"{built_in} (tasks by lm-eval)" if RECIPES[variant].converter else served,
                evaluation.evaluated_in(variant, servers[variant], converter)[1],
            )
    rt.say(
        f"  access: jobs run as {ns}/{access.SERVICE_ACCOUNT} ({target.converter_role_arn}), each down-scoped "
        "by a session policy to read its checkpoint run"
        + (" (and its calibration data)" if any(VARIANTS[v].calibrated for v in req.variants) else "")
        + " and write its variant prefix only"
        + (
            ", evaluations to read reference, variant and data and write its quality.json only"
            if any(VARIANTS[v].quantised for v in req.variants)
            else ""
        )
    )
    rt.say(
        f"  first: claim {registry_layout.model_prefix(req.model, req.version)}{registry.PROMOTION} (only if absent)"
    )
    rt.say(
        f"  then, only if every variant succeeded{gated}: {registry.alias_key(req.model, req.alias)} "
        f"{current or '(new)'} -> {req.version}"
    )
    if target.follower is None:
        rt.say(f"  serving: no model in stack {req.stack} follows {req.model}@{req.alias}; unchanged")
    else:
        rt.say(
            f"  serving: {target.version_path} {target.served_version()} -> {req.version} in stack "
            f"{req.stack} (rewrites stacks/Pulumi.{req.stack}.yaml), then pulumi up"
        )


def _evaluation_line(
    rt: Runtime,
    req: Promotion,
    ns: str,
    checkpoint: registry.Checkpoint,
    server: ModelSpec,
    variant: str,
    image: str,
    place: str,
) -> None:
    """The variant's two gate Jobs: its place's reference measurement (one Job, whichever variants share the
    place) and its own evaluation against those figures."""
    prefix = job_objects.artefact_prefix(req.model, req.version, variant)
    figures = evaluation.reference_prefix(req.model, req.version, place)
    resource = PROFILES[server.accelerator].resource
    need = evaluation.resources(server, checkpoint.size)
    device = evaluation.device_gib(server, checkpoint.size)
    where = "on the host CPU" if device is None else f"{device:.1f} GiB on one device"
    sized = (
        f"({resource}: {need.devices}, cpu {need.cpu:g}, memory {need.memory_gib:g}Gi, disk {need.disk_gib:g}Gi; "
        f"one model, {where}), image {image}"
    )
    rt.say(
        f"    then job {ns}/{evaluation.reference_job_name(req.model, req.version, place)} (once for the variants "
        f"evaluated at {place}): measures the bf16 reference on {server.accelerator} {sized}; reads "
        f"{checkpoint.prefix} + {req.evaluation}, writes {figures}"
    )
    rt.say(
        f"    then job {ns}/{evaluation.job_name(req.model, req.version, variant)}: evaluates {variant} against "
        f"those figures, the same way; reads {prefix} + {req.evaluation} + {figures}, writes "
        f"{evaluation.quality_key(req.model, req.version, variant)}"
    )
    rt.say(f"    quality gate: {_budget(req.budget)}")


def _budget(budget: Budget) -> str:
    return (
        f"held-out perplexity at most {budget.max_perplexity_increase:.1%} above the reference's, exact match at "
        f"most {budget.max_task_drop * 100:.1f} points below it"
    )
