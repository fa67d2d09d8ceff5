"""`promote` and `rollback`, over the ports: the registry's objects, the cluster's Jobs, the stacks.

Promote: check the run and the version (nothing is written before), start one conversion Job per
variant, wait for all, write a manifest per artefact. Any variant failing marks its prefix and the
version _FAILED and stops: alias and serving untouched. Only when every variant succeeded does the
alias move, and then the serving stack's model entry following the alias gets the version (one config
change) and `up` rolls its servers. Rollback moves the alias back and does the same with the version
it restores.
"""
from __future__ import annotations

from typing import Callable, Optional

from infra import registry_layout
from infra.lifecycle.console import Runtime, iso, span
from infra.lifecycle.ports import StackOps, StackOpsError
from infra.lifecycle.progress import StatusLine
from infra.promotion import access
from infra.promotion import jobs as job_objects
from infra.promotion import registry
from infra.promotion.ports import Jobs, JobState, ObjectStore
from infra.promotion.recipes import RECIPES
from infra.promotion.request import Promotion, Rollback
from infra.promotion.serving import ServingTarget, job_access, serving_target
from infra.errors import InputError, Problem

POLL_SECONDS = 30
WAIT_LIMIT_SECONDS = job_objects.DEADLINE_SECONDS + 600  # the Jobs' own deadline fails them before this
StoreFor = Callable[[str, str], ObjectStore]               # (bucket, region) -> store
JobsFor = Callable[[str], Jobs]                             # serving stack -> its cluster's Jobs


def promote(req: Promotion, stacks: StackOps, store_for: StoreFor, jobs_for: JobsFor, rt: Runtime,
            dry_run: bool = False) -> int:
    target = serving_target(stacks, req.stack, req.model, req.alias)
    served = target.served_variant()
    if served is not None and served not in req.variants:
        raise InputError(Problem("--variants", f"stack {req.stack} serves the {served} artefact of {req.model}; "
                                               f"include {served}"))
    role_arn, bucket_arn, key_arn = job_access(target)
    store = store_for(target.bucket, target.region)
    marker = registry.check_run(store, req.run_id)
    checkpoint = registry.final_checkpoint(store, req.run_id)
    registry.check_version_free(store, req.model, req.version)
    current = registry.read_alias(store, req.model, req.alias)
    ns = target.config.serving.namespace
    objects = {variant: job_objects.conversion_objects(
        bucket=store.bucket, bucket_arn=bucket_arn, key_arn=key_arn, role_arn=role_arn, region=target.region, ns=ns,
        checkpoint=checkpoint.prefix, model=req.model, version=req.version, variant=variant, run_id=req.run_id)
        for variant in req.variants}  # all built (and their session policies checked) before any starts
    _print_plan(rt, req, target, checkpoint, current.version if current else None)
    if dry_run:
        rt.say("dry run: nothing was started or written")
        return 0

    cluster = jobs_for(req.stack)
    names = {v: job_objects.job_name(req.model, req.version, v) for v in req.variants}
    source = {"runId": req.run_id, "checkpoint": f"s3://{store.bucket}/{checkpoint.prefix}",
              "checkpointBytes": checkpoint.size, "marker": marker}
    failures: dict[str, str] = {}
    try:
        for variant in req.variants:
            cluster.apply(objects[variant])
            rt.say(f"started job {ns}/{names[variant]} ({variant} on {RECIPES[variant].accelerator})")
        states = _wait(cluster, ns, names, rt)
        for variant in req.variants:
            prefix = job_objects.artefact_prefix(req.model, req.version, variant)
            if states[variant].state != "succeeded":
                failures[variant] = f"job {names[variant]} {states[variant].state}: {states[variant].detail or 'no detail'}"
                continue
            try:
                manifest = registry.build_manifest(store, prefix, source, {
                    "model": req.model, "version": req.version, "job": names[variant], "createdAt": iso(rt.now()),
                    **job_objects.manifest_facts(RECIPES[variant])})
            except ValueError as error:
                failures[variant] = str(error)
                continue
            rt.say(f"wrote {registry.write_manifest(store, prefix, manifest)}")
    except BaseException:
        _mark_version_failed(store, req, rt, {v: "promotion interrupted" for v in req.variants if v not in failures})
        raise
    if failures:
        _mark_version_failed(store, req, rt, failures)
        rt.say(f"promotion failed: {req.model}@{req.alias} stays at {current.version if current else 'nothing'}; "
               f"serving unchanged; {registry_layout.model_prefix(req.model, req.version)} is marked failed "
               "(versions are immutable: promote again to a new version)")
        return 1

    moved = registry.move_alias(store, req.model, req.alias, req.version, iso(rt.now()), runId=req.run_id)
    rt.say(f"moved {registry.alias_key(req.model, req.alias)}: {req.model}@{req.alias} = {moved.version}"
           + (f" (was {current.version})" if current else ""))
    return _roll_out(stacks, target, req.version, rt, undo=f"python -m infra rollback --model {req.model} "
                     f"--alias {req.alias} --stack {req.stack}")


def rollback(req: Rollback, stacks: StackOps, store_for: StoreFor, rt: Runtime) -> int:
    target = serving_target(stacks, req.stack, req.model, req.alias)
    store = store_for(target.bucket, target.region)
    before, after = registry.roll_back_alias(store, req.model, req.alias, iso(rt.now()))
    rt.say(f"moved {registry.alias_key(req.model, req.alias)}: {req.model}@{req.alias} = {after.version} "
           f"(was {before.version})")
    return _roll_out(stacks, target, after.version, rt, undo=None)


def _roll_out(stacks: StackOps, target: ServingTarget, version: str, rt: Runtime, undo: Optional[str]) -> int:
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
        stacks.up(target.stack, lambda line: display.show("up", f"up | {span(rt.now() - started)} | {line.strip()[:100]}"))
    except StackOpsError as error:
        display.end()
        rt.say(f"error: {error}")
        rt.say(f"the alias has moved but stack {target.stack} is not rolled out; fix and run `pulumi up -s "
               f"{target.stack}`" + (f", or undo with `{undo}`" if undo else ""))
        return 1
    display.end()
    rt.say(f"stack {target.stack} serves version {version}")
    return 0


def _wait(cluster: Jobs, ns: str, names: dict[str, str], rt: Runtime) -> dict[str, JobState]:
    display = StatusLine(rt)
    started = rt.now()
    states = {v: JobState("pending") for v in names}
    while True:
        for variant, name in names.items():
            if states[variant].state in ("pending", "running"):
                states[variant] = cluster.state(ns, name)
        elapsed = rt.now() - started
        display.show(",".join(s.state for s in states.values()), f"converting | {span(elapsed)} | " +
                     ", ".join(f"{v} {s.state}" for v, s in states.items()))
        if all(s.state in ("succeeded", "failed") for s in states.values()):
            display.end()
            return states
        if elapsed.total_seconds() >= WAIT_LIMIT_SECONDS:
            display.end()
            return {v: s if s.state in ("succeeded", "failed") else JobState("failed", f"not finished after {span(elapsed)}")
                    for v, s in states.items()}
        rt.sleep(POLL_SECONDS)


def _mark_version_failed(store: ObjectStore, req: Promotion, rt: Runtime, failures: dict[str, str]) -> None:
    at = iso(rt.now())
    for variant, reason in failures.items():
        key = registry.mark_failed(store, job_objects.artefact_prefix(req.model, req.version, variant), reason, at,
                                   runId=req.run_id)
        rt.say(f"variant {variant} failed: {reason}; marked {key}")
    registry.mark_failed(store, registry_layout.model_prefix(req.model, req.version),
                         f"variants failed: {', '.join(sorted(failures))}", at, runId=req.run_id,
                         variants=dict(sorted(failures.items())))


def _print_plan(rt: Runtime, req: Promotion, target: ServingTarget, checkpoint: registry.Checkpoint,
                current: Optional[str]) -> None:
    ns = target.config.serving.namespace
    rt.say(f"promote run {req.run_id} -> {req.model} version {req.version} (registry s3://{target.bucket})")
    rt.say(f"  checkpoint: {checkpoint.prefix} ({checkpoint.objects} objects, {checkpoint.size:,} bytes); "
           f"runs/{req.run_id}/_SUCCESS present")
    for variant in req.variants:
        recipe = RECIPES[variant]
        prefix = job_objects.artefact_prefix(req.model, req.version, variant)
        rt.say(f"  job {ns}/{job_objects.job_name(req.model, req.version, variant)}: {variant} on {recipe.accelerator} "
               f"({recipe.resource}: 1), image {recipe.image}; reads {checkpoint.prefix}, writes {prefix} "
               f"+ {prefix}{registry.MANIFEST}")
    rt.say(f"  access: jobs run as {ns}/{access.SERVICE_ACCOUNT} ({target.converter_role_arn}), each down-scoped "
           "by a session policy to read its checkpoint run and write its variant prefix only")
    rt.say(f"  then, only if every variant succeeded: {registry.alias_key(req.model, req.alias)} "
           f"{current or '(new)'} -> {req.version}")
    if target.follower is None:
        rt.say(f"  serving: no model in stack {req.stack} follows {req.model}@{req.alias}; unchanged")
    else:
        rt.say(f"  serving: {target.version_path} {target.served_version()} -> {req.version} in stack "
               f"{req.stack}, then pulumi up")
