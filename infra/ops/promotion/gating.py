"""The quality gate's Jobs of one promotion (evaluation.py builds them): the reference measured once per place
its variants are evaluated (a pool and an image), then every quantised variant against its place's figures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.core.errors import InputError, Problem
from infra.ops.promotion import evaluation, waiting
from infra.ops.promotion.jobs import JobInputs
from infra.ops.promotion.ports import Jobs, JobState
from infra.ops.promotion.request import Promotion
from infra.ops.runtime import Runtime
from infra.serving.spec import ModelSpec
from infra.serving.variants import VARIANTS

Manifest = dict[str, Any]


def reference_key(where: str) -> str:
    """The key of a reference Job among the promotion's evaluation Jobs (the variants' keys are their names)."""
    return f"reference {where}"


@dataclass(frozen=True)
class EvaluationPlan:
    references: dict[str, Manifest]  # reference_key(place) -> its Job
    variants: dict[str, Manifest]  # quantised variant -> its Job
    place_of: dict[str, str]  # quantised variant -> reference_key of the place it is evaluated at

    @property
    def names(self) -> dict[str, str]:
        """Every evaluation Job's name by its key (the references' first)."""
        return {key: job["metadata"]["name"] for key, job in {**self.references, **self.variants}.items()}

    def measured(self, variant: str) -> dict[str, str]:
        """What the manifest's quality block records of the Jobs that measured `variant`."""
        if variant not in self.variants:
            return {}
        names = self.names
        return {"job": names[variant], "referenceJob": names[self.place_of[variant]]}


def evaluation_plan(
    req: Promotion, shared: JobInputs, checkpoint_bytes: int, servers: dict[str, ModelSpec]
) -> EvaluationPlan:
    """Every evaluation Job, built (and its session policy checked) before anything starts."""
    if req.evaluation is None:  # the request requires it for a quantised variant: then none is asked for
        return EvaluationPlan({}, {}, {})
    references: dict[str, Manifest] = {}
    variants: dict[str, Manifest] = {}
    place_of: dict[str, str] = {}
    try:
        for variant in req.variants:
            if not VARIANTS[variant].quantised:
                continue
            args = evaluation.EvaluationArgs(
                **shared,
                checkpoint_bytes=checkpoint_bytes,
                evaluation=req.evaluation,
                variant=variant,
                server=servers[variant],
            )
            _, where = evaluation.evaluated_in(variant, servers[variant], shared["converter_image"])
            key = reference_key(where)
            if key not in references:
                references[key] = evaluation.reference_job(**args)
            place_of[variant] = key
            variants[variant] = evaluation.evaluation_job(**args)
    except ValueError as error:  # a session policy past the size STS allows: the evaluation prefix is too long
        raise InputError(Problem("--eval-data", f"{req.evaluation}: {error}; use a shorter prefix")) from None
    return EvaluationPlan(references, variants, place_of)


def run(
    cluster: Jobs,
    ns: str,
    plan: EvaluationPlan,
    states: dict[str, JobState],
    failures: dict[str, str],
    rt: Runtime,
) -> None:
    """Once every conversion succeeded: measure each place's reference, then evaluate each variant against it (its
    Job writes the quality.json the gate judges). A failed, stuck or late Job fails its variants like a failed
    conversion; after a failed conversion nothing is evaluated (the version fails anyway)."""
    if failures:
        converted = ", ".join(sorted(failures))
        for variant in plan.variants:
            failures.setdefault(variant, f"not evaluated: variant {converted} failed")
        return
    names = plan.names
    for key, job in plan.references.items():
        cluster.create([job])
        states[key] = JobState("pending")
        rt.say(f"started job {ns}/{names[key]} (measures the bf16 reference at {key.removeprefix('reference ')})")
    stuck = waiting.wait_for(cluster, ns, {k: names[k] for k in plan.references}, states, rt, doing="evaluating")
    for variant, key in plan.place_of.items():
        state = states[key]
        if state.state != "succeeded":
            why = state.detail or "no detail"
            failures[variant] = f"evaluation job {names[key]} (its reference) {state.state}: {why}"
    if failures:
        waiting.stop(cluster, ns, names, states, rt, stuck)
        return
    for variant, job in plan.variants.items():
        cluster.create([job])
        states[variant] = JobState("pending")
        rt.say(f"started job {ns}/{names[variant]} (evaluates {variant} against the bf16 reference's figures)")
    stuck = waiting.wait_for(cluster, ns, {v: names[v] for v in plan.variants}, states, rt, doing="evaluating")
    stopped = "stopped: the evaluation of {} failed"
    waiting.record_failures(list(plan.variants), names, states, failures, "evaluation job", stopped)
    if failures:
        waiting.stop(cluster, ns, names, states, rt, stuck)
