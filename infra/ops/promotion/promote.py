"""`promote` and `rollback`, over the ports: the registry's objects, the cluster's Jobs, the stacks.

Promote: check the run, the version and that every Job fits its pool (nothing is written before), claim
the version (models/<name>/<version>/_PROMOTION, only if absent), create one conversion Job per variant,
wait for all, then the quality gate's Jobs (gating.py: the reference measured once per place, then one Job
per quantised variant, which writes the quality.json the gate judges), write a manifest per artefact. A
variant failing (or its pod unschedulable for too long) stops the others (their Jobs are deleted) and marks
every variant prefix and the version _FAILED: alias and serving untouched. Ctrl-C does the same. Only when
every variant succeeded, and the version still has no _FAILED, does the alias move (If-Match on the alias
object), and then the serving stack's model entry following the alias gets the version (one config change)
and `up` rolls its servers. Rollback moves the alias back, to a version that is servable only, and does the
same with the version it restores.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from infra.core.errors import InputError, Problem
from infra.ops.lifecycle.ports import StackOps, StackOpsError
from infra.ops.progress import StatusLine
from infra.ops.promotion import evaluation, gate, gating, plan, registry, sizing, waiting
from infra.ops.promotion import jobs as job_objects
from infra.ops.promotion.ports import Conflict, Jobs, JobState, ObjectStore
from infra.ops.promotion.recipes import RECIPES
from infra.ops.promotion.request import Promotion, Rollback, with_variants
from infra.ops.promotion.serving import ServingTarget, job_access, serving_target
from infra.ops.runtime import Runtime, iso, span
from infra.registry import layout as registry_layout
from infra.serving.spec import ModelSpec
from infra.serving.variants import VARIANTS

StoreFor = Callable[[str, str], ObjectStore]  # (bucket, region) -> store
JobsFor = Callable[[str], Jobs]  # serving stack -> its cluster's Jobs


def promote(
    req: Promotion, stacks: StackOps, store_for: StoreFor, jobs_for: JobsFor, rt: Runtime, dry_run: bool = False
) -> int:
    target = serving_target(stacks, req.stack, req.model, req.alias)
    if not req.variants:
        served_here = target.variants_served(req.model)
        if not served_here:
            raise InputError(
                Problem(
                    "--variants",
                    f"stack {req.stack} has no entry of {req.model} to build for: name the variants "
                    f"(from {', '.join(VARIANTS)})",
                )
            )
        req = with_variants(req, served_here, f"the variants stack {req.stack} serves {req.model} as")
    served = target.served_variant()
    if served is not None and served not in req.variants:
        raise InputError(
            Problem("--variants", f"stack {req.stack} serves the {served} artefact of {req.model}; include {served}")
        )
    gate.check_buildable(req, list(target.config.serving.node_pools.declared()))
    gate.check_converter(req, target.config.serving.converter_image)
    store = store_for(target.bucket, target.region)
    gate.check_data(store, req)
    marker = registry.check_run(store, req.run_id)
    checkpoint = registry.final_checkpoint(store, req.run_id, req.checkpoint)
    registry.check_version_free(store, req.model, req.version)
    current = registry.read_alias(store, req.model, req.alias)
    servers = {v: target.server_for(v, req.model, req.version) for v in req.variants}
    sizes = _sizes(req, target, checkpoint, servers)
    ns = target.config.serving.namespace
    shared = _job_inputs(req, store.bucket, target, checkpoint)
    objects = _conversion_objects(req, shared, sizes, servers)
    evaluations = gating.evaluation_plan(req, shared, checkpoint.size, servers)
    plan.print_plan(rt, req, target, checkpoint, current.version if current else None, sizes, servers)
    if dry_run:
        rt.say("dry run: nothing was started or written")
        return 0

    names = {v: job_objects.job_name(req.model, req.version, v) for v in req.variants}
    claim = registry.claim_version(
        store,
        req.model,
        req.version,
        {
            "run": req.run_id,
            "variants": list(req.variants),
            "started_at": iso(rt.now()),
            "checkpoint": f"s3://{store.bucket}/{checkpoint.prefix}",
        },
    )
    rt.say(f"claimed {claim}")
    source = {
        "runId": req.run_id,
        "checkpoint": f"s3://{store.bucket}/{checkpoint.prefix}",
        "checkpointBytes": checkpoint.size,
        "marker": marker,
    }
    states: dict[str, JobState] = {}  # variants whose Job this promotion created, and their last state
    eval_states: dict[str, JobState] = {}  # the same for the evaluation Jobs (the references' and the variants')
    failures: dict[str, str] = {}
    cluster: Jobs | None = None
    try:
        cluster = jobs_for(req.stack)
        for variant in req.variants:
            cluster.create(objects[variant])
            states[variant] = JobState("pending")
            rt.say(f"started job {ns}/{names[variant]} ({variant} on {servers[variant].accelerator})")
        stuck = waiting.wait_for(cluster, ns, names, states, rt)
        waiting.record_failures(list(req.variants), names, states, failures, "job", "stopped: variant {} failed")
        if failures:
            waiting.stop(cluster, ns, names, states, rt, stuck)
        gating.run(cluster, ns, evaluations, eval_states, failures, rt)
        for variant in req.variants:
            if variant in failures:
                continue
            prefix = job_objects.artefact_prefix(req.model, req.version, variant)
            try:
                manifest = registry.build_manifest(
                    store,
                    prefix,
                    source,
                    {
                        "model": req.model,
                        "version": req.version,
                        "job": names[variant],
                        "createdAt": iso(rt.now()),
                        **job_objects.manifest_facts(RECIPES[variant], servers[variant]),
                    },
                )
            except ValueError as error:
                failures[variant] = str(error)
                continue
            block, out_of_budget = gate.judged(store, prefix, variant, req)
            if block is not None:
                # the figures are kept, passed or not, with the Job and hardware that measured them
                measured = evaluations.measured(variant)
                manifest["quality"] = {**block, **measured, "accelerator": servers[variant].accelerator}
            if block is not None or out_of_budget is None:
                rt.say(f"wrote {registry.write_manifest(store, prefix, manifest)}")
            if out_of_budget is not None:
                failures[variant] = out_of_budget
    except BaseException as error:
        why = "interrupted" if isinstance(error, KeyboardInterrupt) else f"error: {error}"
        rt.say(f"{why}: stopping the promotion")
        if cluster is not None:
            waiting.stop(cluster, ns, names, states, rt)
            waiting.stop(cluster, ns, evaluations.names, eval_states, rt)
        _mark_version_failed(store, req, rt, {v: failures.get(v, f"promotion stopped ({why})") for v in req.variants})
        raise
    if failures:
        _mark_version_failed(store, req, rt, failures)
        rt.say(
            f"promotion failed: {req.model}@{req.alias} stays at {current.version if current else 'nothing'}; "
            f"serving unchanged; {registry_layout.model_prefix(req.model, req.version)} is marked failed "
            "(versions are immutable: promote again to a new version)"
        )
        return 1

    _check_servable(store, req.model, req.version, list(req.variants), "--version")  # a _FAILED since?
    try:
        moved = registry.move_alias(store, req.model, req.alias, req.version, iso(rt.now()), runId=req.run_id)
    except Conflict as error:
        rt.say(
            f"error: {error}; version {req.version} is complete but {req.model}@{req.alias} did not move; "
            "serving unchanged"
        )
        return 1
    rt.say(
        f"moved {registry.alias_key(req.model, req.alias)}: {req.model}@{req.alias} = {moved.version}"
        + (f" (was {moved.previous[-1]})" if moved.previous else "")
    )
    return _roll_out(
        stacks,
        target,
        req.version,
        rt,
        undo=f"python -m infra rollback --model {req.model} --alias {req.alias} --stack {req.stack}",
    )


def _job_inputs(
    req: Promotion, bucket: str, target: ServingTarget, checkpoint: registry.Checkpoint
) -> job_objects.JobInputs:
    role_arn, bucket_arn, key_arn = job_access(target)
    return job_objects.JobInputs(
        bucket=bucket,
        bucket_arn=bucket_arn,
        key_arn=key_arn,
        role_arn=role_arn,
        region=target.region,
        ns=target.config.serving.namespace,
        checkpoint=checkpoint.prefix,
        model=req.model,
        version=req.version,
        run_id=req.run_id,
        mirror=target.image_mirror,
        converter_image=target.config.serving.converter_image,
    )


def _conversion_objects(
    req: Promotion, shared: job_objects.JobInputs, sizes: dict[str, sizing.Resources], servers: dict[str, ModelSpec]
) -> dict[str, list[dict[str, Any]]]:
    """Each variant's conversion Job, all built (and their session policies checked) before any starts; a
    calibrated variant's reads the request's calibration data; llm-compressor's run in the converter image."""
    try:
        return {
            variant: job_objects.conversion_objects(
                **shared,
                variant=variant,
                resources=sizes[variant],
                server=servers[variant],
                calibration=req.calibration if VARIANTS[variant].calibrated else None,
            )
            for variant in req.variants
        }
    except ValueError as error:  # a session policy past the size STS allows: the calibration prefix is too long
        raise InputError(Problem("--calibration-data", f"{req.calibration}: {error}; use a shorter prefix")) from None


def rollback(req: Rollback, stacks: StackOps, store_for: StoreFor, rt: Runtime) -> int:
    target = serving_target(stacks, req.stack, req.model, req.alias)
    store = store_for(target.bucket, target.region)
    served = target.served_variant()
    variants = [served] if served else []
    before, after = registry.roll_back_alias(
        store,
        req.model,
        req.alias,
        iso(rt.now()),
        check=lambda version: _check_servable(store, req.model, version, variants, "--alias"),
    )
    rt.say(
        f"moved {registry.alias_key(req.model, req.alias)}: {req.model}@{req.alias} = {after.version} "
        f"(was {before.version})"
    )
    return _roll_out(stacks, target, after.version, rt, undo=None)


def _check_servable(store: ObjectStore, model: str, version: str, variants: list[str], flag: str) -> None:
    problems = registry.servable_problems(store, model, version, variants)
    if problems:
        raise InputError(
            Problem(flag, f"{model} version {version} cannot be served: {'; '.join(problems)}; the alias was not moved")
        )


def _sizes(
    req: Promotion, target: ServingTarget, checkpoint: registry.Checkpoint, servers: dict[str, ModelSpec]
) -> dict[str, sizing.Resources]:
    """Each variant's Job size; InputError naming variant and pool when no instance type of its pool holds it."""
    sizes, problems = {}, []
    for variant in req.variants:
        recipe, accelerator = RECIPES[variant], servers[variant].accelerator
        pool = getattr(target.config.serving.node_pools, accelerator)
        devices = servers[variant].accelerators_per_replica
        sizes[variant] = sizing.conversion_resources(recipe, checkpoint.size, devices)
        problem = sizing.fit_problem(
            variant, accelerator, pool.instance_types, pool.disk_gib, sizes[variant], checkpoint.size
        )
        if problem:
            problems.append(problem)
        if VARIANTS[variant].quantised and req.evaluation is not None:
            problems += evaluation.fit_problems(
                variant, servers[variant], pool.instance_types, pool.disk_gib, checkpoint.size
            )
    if target.follower is not None:
        entry = target.config.serving.models[target.follower]
        pool = getattr(target.config.serving.node_pools, entry.accelerator)
        field = f"mlinfra:serving.models[{target.follower}]"
        problems += sizing.server_problems(field, entry, pool.instance_types, checkpoint.size)
    if problems:
        raise InputError(problems)
    return sizes


def _roll_out(stacks: StackOps, target: ServingTarget, version: str, rt: Runtime, undo: str | None) -> int:
    if target.follower is None:
        rt.say(f"no model in stack {target.stack} follows this alias; serving unchanged")
        return 0
    if target.served_version() == version:
        rt.say(f"stack {target.stack} already serves {version}")
        return 0
    stacks.set_config(target.stack, target.version_path, version)
    rt.say(f"set {target.version_path} = {version} in stack {target.stack}; pulumi up ...")
    display = StatusLine(rt)
    started = rt.now()
    try:
        stacks.up(
            target.stack, lambda line: display.show("up", f"up | {span(rt.now() - started)} | {line.strip()[:100]}")
        )
    except StackOpsError as error:
        display.end()
        rt.say(f"error: {error}")
        rt.say(
            f"the alias has moved but stack {target.stack} is not rolled out; fix and run `pulumi up -s "
            f"{target.stack}`" + (f", or undo with `{undo}`" if undo else "")
        )
        rt.say(commit_hint(target.stack))
        return 1
    display.end()
    rt.say(f"stack {target.stack} serves version {version}")
    rt.say(commit_hint(target.stack))
    return 0


def commit_hint(stack: str) -> str:
    """The config change lives in the stack file: uncommitted, the next `pulumi up` from git reverts it."""
    path = f"stacks/Pulumi.{stack}.yaml"
    return (
        f"{path} was rewritten: commit it (git commit {path}), or the next `pulumi up` from a checkout "
        "puts the previous version back"
    )


def _mark_version_failed(store: ObjectStore, req: Promotion, rt: Runtime, failures: dict[str, str]) -> None:
    """_FAILED in each failed variant's prefix, in the others' too (no variant of a failed version is ever
    served: the model servers refuse a prefix with _FAILED), and in the version's."""
    at = iso(rt.now())
    for variant in req.variants:
        reason = failures.get(variant) or f"version {req.version} failed: {', '.join(sorted(failures))} failed"
        key = registry.mark_failed(
            store, job_objects.artefact_prefix(req.model, req.version, variant), reason, at, runId=req.run_id
        )
        if variant in failures:
            rt.say(f"variant {variant} failed: {reason}; marked {key}")
        else:
            rt.say(f"marked {key} (the version failed)")
    registry.mark_failed(
        store,
        registry_layout.model_prefix(req.model, req.version),
        f"variants failed: {', '.join(sorted(failures))}",
        at,
        runId=req.run_id,
        variants=dict(sorted(failures.items())),
    )
