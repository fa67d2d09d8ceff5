"""The evaluation Jobs of the quality gate, as whole Kubernetes objects (pure): one Job per quantised variant.

After a quantised variant's conversion Job succeeded, `promote` creates its evaluation Job. It runs as the
serving stack's `model-converter` service account, on the variant's serving pool (the node selector,
toleration, scheduler and resources of the model server that will serve it, manifests.py), in that server's
image, or for a variant llm-compressor built, in the converter image, where lm-eval scores the tasks:
  1. sidecar `credentials` (aws-cli) assumes the converter role with this Job's own session policy: read the
                                    reference checkpoint, the variant's prefix and the evaluation data; write
                                    models/<name>/<version>/<variant>/quality.json, that one object
                                    (converter_access.evaluation_session_policy);
  2. init `fetch`    (aws-cli)      copies the reference checkpoint, the variant artefact and the evaluation
                                    data to /work/reference, /work/variant, /work/data;
  3. init `evaluate` (server image) sees them read-only under /in, writes the project's evaluation program
                                    (evaluate.py, shipped in the command as engine_check.py is) to /out and
                                    runs it on the reference, then (the reference freed) the variant:
                                    /out/quality.json; no AWS credentials at all. In the converter image
                                    lm_tasks.py scores each model's lm-eval tasks first (one model at a
                                    time, a process each), and evaluate.py records them beside its figures.
                                    On inf2 it runs on the host CPU: a neuron-int8 variant is the reference's
                                    architecture with NxD Inference's dequantised int8 weights. The step asks
                                    for one model's memory (resources), and promote checks it fits a node
                                    before anything runs;
  4. `upload`        (aws-cli)      copies /out/quality.json where gate.py reads it.
Only then does `promote` judge the variant. An evaluation error fails the Job at once (podFailurePolicy); a
node lost is retried without counting, as for the conversion Jobs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from shlex import quote
from typing import Any

from infra.core.errors import Problem
from infra.core.naming import slug
from infra.ops.promotion import jobs, sizing
from infra.ops.promotion.recipes import CONVERTER_PYTHON, RECIPES, step_image
from infra.ops.promotion.sizing import Resources
from infra.registry import layout as registry_layout
from infra.serving.aws import converter_access as access
from infra.serving.aws.mirror import Mirror, pulled
from infra.serving.families import FAMILIES
from infra.serving.scheduling import ACCELERATOR_LABEL, taint
from infra.serving.servers import PROFILES, shm_mount, shm_volume
from infra.serving.spec import ModelSpec

Manifest = dict[str, Any]
VERB = "evaluate"
# Two models, a few hundred sequences and tasks: minutes on a GPU, loading them dominates; on inf2's host CPU
# (neuron-int8) not measured, and a 7-8B model may need longer (docs/registry-and-promotion.md).
DEADLINE_SECONDS = 2 * 3600
# The evaluation program, written into the pod by the `evaluate` step (it runs in the server image: Python's
# standard library and torch, transformers to load the two checkpoints, safetensors to read a neuron-int8
# artefact's quantized checkpoint; tests/contracts checks the image).
EVALUATE = (Path(__file__).parent / "evaluate.py").read_text(encoding="utf-8")
# The task half, lm-evaluation-harness, where the Job runs in the converter image (which installs it).
LM_TASKS = (Path(__file__).parent / "lm_tasks.py").read_text(encoding="utf-8")
PROGRAM = "/out/evaluate.py"
TASKS_PROGRAM = "/out/lm_tasks.py"
RESULT = f"/out/{access.QUALITY_FILE}"
_GIB = 1 << 30
WORK_MARGIN_GIB = 10  # beside the reference and the variant (each at most the checkpoint's size)
# evaluate.py holds one model at a time (the reference is measured and freed before the variant is loaded), in
# its checkpoint dtype, so no step of it needs more than the checkpoint's size of weights:
# - host memory: transformers reads the weights into host memory before they go to the GPU, and on inf2 the model
#   runs there (a compiled Neuron model is no torch module); plus Python, torch, transformers, the tokenizer and
#   the data (HOST_MARGIN_GIB);
# - device memory (GPU pools): the whole model on one device (evaluate.py's transformers loader), plus the CUDA
#   context and one sequence's activations (DEVICE_MARGIN_GIB).
# Estimates on the safe side, not measurements; a variant dequantised by its loader is the reference's size.
HOST_MARGIN_GIB = 8
DEVICE_MARGIN_GIB = 2


def on_cpu(server: ModelSpec) -> bool:
    """Whether the variant is evaluated on the host CPU (Neuron pools: load_nxd_int8 in evaluate.py)."""
    return FAMILIES[server.accelerator].neuron


def memory_gib(checkpoint_bytes: int) -> int:
    """The evaluate step's memory: one model of the checkpoint's size, and the margin."""
    return math.ceil(checkpoint_bytes / _GIB) + HOST_MARGIN_GIB


def device_gib(server: ModelSpec, checkpoint_bytes: int) -> float | None:
    """The memory one device needs to hold a model of the checkpoint's size; None where the CPU evaluates."""
    return None if on_cpu(server) else checkpoint_bytes / _GIB + DEVICE_MARGIN_GIB


def resources(server: ModelSpec, checkpoint_bytes: int) -> Resources:
    """The evaluate step's requests: the server's CPU and devices, memory and disk from the checkpoint."""
    return Resources(
        cpu=server.cpu,
        memory_gib=memory_gib(checkpoint_bytes),
        disk_gib=work_gib(checkpoint_bytes),
        devices=server.accelerators_per_replica,
    )


def fit_problems(
    variant: str, server: ModelSpec, instance_types: Sequence[str], disk_gib: int, checkpoint_bytes: int
) -> list[Problem]:
    """Whether the variant's evaluation Job fits a node of its pool, and its model one of the node's devices:
    promote refuses a variant whose gate could not run before any Job starts (also with --dry-run)."""
    task = f"evaluate its {checkpoint_bytes / _GIB:.1f} GiB reference and itself, one model at a time"
    pool = server.accelerator
    need = resources(server, checkpoint_bytes)
    found = [sizing.fit_problem(variant, pool, instance_types, disk_gib, need, checkpoint_bytes, task)]
    device = device_gib(server, checkpoint_bytes)
    if device is not None:
        found.append(sizing.device_memory_problem(variant, pool, instance_types, device, task))
    return [problem for problem in found if problem is not None]


def job_name(model: str, version: str, variant: str) -> str:
    return jobs.job_name(model, version, variant, verb=VERB)


def quality_key(model: str, version: str, variant: str) -> str:
    return registry_layout.model_prefix(model, version, variant) + access.QUALITY_FILE


def work_gib(checkpoint_bytes: int) -> int:
    """The work volume: the reference checkpoint and the variant (no larger than it), and a margin."""
    return math.ceil(2 * checkpoint_bytes / _GIB) + WORK_MARGIN_GIB


def labels(model: str, version: str, variant: str, accelerator: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "model-evaluation",
        "app.kubernetes.io/instance": model,
        "app.kubernetes.io/version": slug(version, 63),
        "app.kubernetes.io/component": variant,
        "app.kubernetes.io/managed-by": "mlinfra",
        ACCELERATOR_LABEL: accelerator,
    }


def session_policy(
    *, bucket_arn: str, key_arn: str, checkpoint: str, model: str, version: str, variant: str, evaluation: str
) -> str:
    """The Job's session policy as sent to STS (compact JSON, checked against the size limit)."""
    return access.packed(
        access.evaluation_session_policy(bucket_arn, key_arn, checkpoint, model, version, variant, evaluation)
    )


def evaluate_script(python: str | None = None) -> str:
    """The evaluate step: evaluate.py with the server image's python3; with `python` (the converter image's, which
    has lm-eval), lm_tasks.py first scores the reference's and the variant's tasks, which evaluate.py records."""
    # The unset is a second guard beside the pod annotation (Pod Identity injects nothing here).
    script = (
        "set -eu\nunset AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE\n"
        f"cat > {PROGRAM} <<'PY'\n{EVALUATE}PY\n"
    )
    args = f"--reference /in/reference --variant /in/variant --data /in/data --out {RESULT}"
    if python is None:
        return script + f"python3 {PROGRAM} {args}\n"
    # lm-eval's datasets cache and the default task's YAML in the container's own disk, not the small /out.
    script += f"cat > {TASKS_PROGRAM} <<'PY'\n{LM_TASKS}PY\nexport HF_HOME=/tmp/hf-home\n"
    for model in ("reference", "variant"):
        script += (
            f"{python} {TASKS_PROGRAM} --model /in/{model} --data /in/data --out /out/tasks-{model}.json "
            "--work /tmp/lm-eval-tasks\n"
        )
    return script + f"{python} {PROGRAM} {args} --task-scores /out/tasks-reference.json /out/tasks-variant.json\n"


def evaluation_job(
    *,
    bucket: str,
    bucket_arn: str,
    key_arn: str,
    role_arn: str,
    region: str,
    ns: str,
    checkpoint: str,
    checkpoint_bytes: int,
    evaluation: str,
    model: str,
    version: str,
    variant: str,
    run_id: str,
    server: ModelSpec,
    mirror: Mirror | None = None,
    converter_image: str | None = None,
) -> Manifest:
    """`server`: the model entry that will serve this variant (its pool, resources and image); `evaluation`:
    the registry prefix of the evaluation data (datasets/evals/<name>/); `converter_image`: where a variant
    llm-compressor built is evaluated, its tasks by lm-eval (installed there, not in the server image)."""
    image = step_image(variant, server.image, converter_image, step="evaluated")
    tasks_by_lm_eval = RECIPES[variant].converter  # lm-eval is in the converter image only
    profile = PROFILES[server.accelerator]
    devices = str(server.accelerators_per_replica)
    prefix = registry_layout.model_prefix(model, version, variant)
    target = f"s3://{bucket}/{quality_key(model, version, variant)}"
    session = access.evaluation_session_name(model, version, variant)
    policy = session_policy(
        bucket_arn=bucket_arn,
        key_arn=key_arn,
        checkpoint=checkpoint,
        model=model,
        version=version,
        variant=variant,
        evaluation=evaluation,
    )
    meta = {
        "name": job_name(model, version, variant),
        "namespace": ns,
        "labels": labels(model, version, variant, server.accelerator),
        "annotations": {
            "mlinfra.io/run-id": run_id,
            "mlinfra.io/reference": f"s3://{bucket}/{checkpoint}",
            "mlinfra.io/variant": f"s3://{bucket}/{prefix}",
            "mlinfra.io/evaluation-data": f"s3://{bucket}/{evaluation}",
            "mlinfra.io/target": target,
            "mlinfra.io/role-session": session,
        },
    }
    env = [{"name": "AWS_REGION", "value": region}]
    work = [{"name": "work", "mountPath": "/work"}]
    copies = "\n".join(
        f"aws s3 sync --only-show-errors {quote(f's3://{bucket}/{source}')} /work/{into}"
        for source, into in ((checkpoint, "reference"), (prefix, "variant"), (evaluation, "data"))
    )
    disk = f"{work_gib(checkpoint_bytes)}Gi"
    memory = f"{memory_gib(checkpoint_bytes)}Gi"
    evaluate = {
        "name": "evaluate",
        "image": pulled(mirror, image),
        "command": ["/bin/sh", "-c", evaluate_script(CONVERTER_PYTHON if tasks_by_lm_eval else None)],
        "env": env,
        # What it judges, read-only; only its result is writable.
        "volumeMounts": [
            {"name": "work", "mountPath": "/in", "readOnly": True},
            {"name": "out", "mountPath": "/out"},
            shm_mount(),
        ],
        "securityContext": {"allowPrivilegeEscalation": False},
        # The server's CPU and devices (manifests.py), memory for one model (resources), and the work volume as
        # ephemeral storage.
        "resources": {
            "requests": {
                "cpu": str(server.cpu),
                "memory": memory,
                "ephemeral-storage": disk,
                profile.resource: devices,
            },
            "limits": {"memory": memory, profile.resource: devices},
        },
    }
    pod: dict[str, Any] = {
        "serviceAccountName": access.SERVICE_ACCOUNT,
        "restartPolicy": "Never",
        "nodeSelector": {ACCELERATOR_LABEL: server.accelerator},
        "tolerations": [taint(server.accelerator).toleration()],
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "initContainers": [
            jobs.credentials_container(mirror, env, access.credentials_script(role_arn, session, policy)),
            jobs.s3_container("fetch", mirror, env, copies, work),
            evaluate,
        ],
        "containers": [
            jobs.s3_container(
                "upload",
                mirror,
                env,
                f"aws s3 cp --only-show-errors {RESULT} {quote(target)}",
                [{"name": "out", "mountPath": "/out", "readOnly": True}],
            )
        ],
        "volumes": [
            {"name": "work", "emptyDir": {"sizeLimit": disk}},
            {"name": "out", "emptyDir": {"sizeLimit": "16Mi"}},
            {"name": "aws", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
            shm_volume(),
        ],
    }
    if profile.scheduler_name:
        pod["schedulerName"] = profile.scheduler_name
    skip = jobs.sidecar_only_credentials(pod)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "backoffLimit": jobs.BACKOFF_LIMIT,
            "podFailurePolicy": {
                "rules": [
                    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                    {
                        "action": "FailJob",
                        "onExitCodes": {"containerName": "evaluate", "operator": "NotIn", "values": [0]},
                    },
                ]
            },
            "activeDeadlineSeconds": DEADLINE_SECONDS,
            "ttlSecondsAfterFinished": jobs.KEEP_FINISHED_SECONDS,
            "template": {
                "metadata": {"labels": meta["labels"], "annotations": {**skip, **jobs.SAFE_TO_EVICT}},
                "spec": pod,
            },
        },
    }
