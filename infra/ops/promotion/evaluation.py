"""The evaluation Jobs of the quality gate, as whole Kubernetes objects (pure): one Job per place a reference is
measured, then one per quantised variant.

After every conversion Job succeeded, `promote` measures the bf16 reference once per evaluation place (a pool and
an image: quantised variants built by llm-compressor are evaluated in the converter image, where lm-eval scores the
tasks, neuron-int8 in the Neuron server's), keeps its figures with the version in the registry
(models/<name>/<version>/reference/<place>/), then judges each variant against them. Both Jobs run as the serving
stack's `model-converter` service account, on the variant's serving pool (the node selector, toleration, scheduler
and resources of the model server that will serve it, manifests.py), in that place's image:
  1. sidecar `credentials` (aws-cli) assumes the converter role with the Job's own session policy: read what it
                                    fetches; write only its results (converter_access.evaluation_session_policy);
  2. init `fetch`    (aws-cli)      the reference Job: the checkpoint and the evaluation data to /work/model and
                                    /work/data; a variant's: its artefact, the data and the reference's figures
                                    (/work/model, /work/data, /work/reference);
  3. init `evaluate` (image)        sees them read-only under /in, writes the project's evaluation program
                                    (evaluate.py, shipped in the command as engine_check.py is) to /out and
                                    runs it: on the reference (--save-reference: /out/figures.json), or on the
                                    variant against the reference's figures (/out/quality.json); no AWS
                                    credentials at all. In the converter image lm_tasks.py scores the model's
                                    lm-eval tasks first (/out/tasks.json for the reference, which the variant's
                                    Job reads back; its own beside), and evaluate.py records them. On inf2 it
                                    runs on the host CPU: a neuron-int8 variant is the reference's architecture
                                    with NxD Inference's dequantised int8 weights. The step asks for one model's
                                    memory (resources), and promote checks it fits a node before anything runs;
  4. `upload`        (aws-cli)      copies the results where the next Job (figures) or gate.py (quality.json)
                                    reads them.
Only then does `promote` judge the variant. An evaluation error fails the Job at once (podFailurePolicy); a
node lost is retried without counting, as for the conversion Jobs.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from shlex import quote
from typing import Any, Unpack

from infra.core.errors import Problem
from infra.core.naming import slug
from infra.ops.promotion import jobs, sizing
from infra.ops.promotion.recipes import CONVERTER_PYTHON, RECIPES, step_image
from infra.ops.promotion.sizing import Resources
from infra.registry import layout as registry_layout
from infra.serving import engine
from infra.serving.aws import converter_access as access
from infra.serving.aws.mirror import pulled
from infra.serving.families import FAMILIES
from infra.serving.scheduling import ACCELERATOR_LABEL, taint
from infra.serving.servers import PROFILES, shm_mount, shm_volume
from infra.serving.spec import ModelSpec

Manifest = dict[str, Any]
VERB = "evaluate"
# One model, a few hundred sequences and tasks: minutes on a GPU, loading it dominates; on inf2's host CPU
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
FIGURES = "figures.json"  # the reference's measurement (evaluate.py --save-reference)
TASKS = "tasks.json"  # the reference's lm-eval scores (lm_tasks.py), where the converter image scores tasks
REFERENCE = "reference"  # models/<name>/<version>/reference/<place>/: the reference's results, kept with the version
_GIB = 1 << 30
WORK_MARGIN_GIB = 10  # beside the one model a Job fetches (the reference, or a variant no larger than it)
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
    task = f"evaluate its {checkpoint_bytes / _GIB:.1f} GiB reference, then itself, one model at a time"
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
    """The work volume: one model (the reference checkpoint, or the variant, no larger than it), and a margin."""
    return math.ceil(checkpoint_bytes / _GIB) + WORK_MARGIN_GIB


def labels(model: str, version: str, variant: str, accelerator: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "model-evaluation",
        "app.kubernetes.io/instance": model,
        "app.kubernetes.io/version": slug(version, 63),
        "app.kubernetes.io/component": variant,
        "app.kubernetes.io/managed-by": "mlinfra",
        ACCELERATOR_LABEL: accelerator,
    }


def place(server: ModelSpec, image: str) -> str:
    """Where a variant is evaluated, as one registry segment: its pool and a digest of the image (the figures of a
    reference are those of one pool's devices and one image's libraries, so variants share them only there)."""
    return f"{server.accelerator}-{hashlib.sha256(image.encode()).hexdigest()[:8]}"


def evaluated_in(variant: str, server: ModelSpec, converter_image: str | None) -> tuple[str, str]:
    """(image, place) of a variant's evaluation: the converter image for what llm-compressor built (lm-eval is
    there), the server's for the rest; ValueError when a converter variant is given none."""
    image = step_image(variant, server.image, converter_image, step="evaluated")
    return image, place(server, image)


def reference_prefix(model: str, version: str, where: str) -> str:
    return registry_layout.model_prefix(model, version, REFERENCE) + f"{slug(where, 63)}/"


def reference_job_name(model: str, version: str, where: str) -> str:
    return jobs.job_name(model, version, f"{REFERENCE}-{where}", verb=VERB)


def evaluate_script(python: str | None, evaluate_args: str, serve: list[str] | None = None) -> str:
    """The evaluate step: evaluate.py (`evaluate_args`) with the server image's python3; with `python` (the converter
    image's, which has lm-eval), lm_tasks.py first scores the model's tasks into /out/tasks.json, which evaluate.py
    reads, with `serve` (the server's engine flags) on the model as the image's own vLLM serves it."""
    # The unset is a second guard beside the pod annotation (Pod Identity injects nothing here).
    script = (
        "set -eu\nunset AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE\n"
        f"cat > {PROGRAM} <<'PY'\n{EVALUATE}PY\n"
    )
    if python is None:
        return script + f"python3 {PROGRAM} {evaluate_args}\n"
    # lm-eval's datasets cache and the default task's YAML in the container's own disk, not the small /out.
    return script + (
        f"cat > {TASKS_PROGRAM} <<'PY'\n{LM_TASKS}PY\nexport HF_HOME=/tmp/hf-home\n"
        f"{python} {TASKS_PROGRAM} --model /in/model --data /in/data --out /out/{TASKS} --work /tmp/lm-eval-tasks"
        + (f" --serve {quote(json.dumps(serve))}" if serve is not None else "")
        + "\n"
        f"{python} {PROGRAM} {evaluate_args}\n"
    )


class EvaluationArgs(jobs.JobInputs):
    """What both evaluation Jobs are built from: the promotion's Job inputs, and `server`, the model entry that will
    serve `variant` (its pool, resources and image); `evaluation`: the registry prefix of the evaluation data
    (datasets/evals/<name>/). A variant llm-compressor built is evaluated in `converter_image`, its tasks by lm-eval
    (installed there, not in the server image)."""

    checkpoint_bytes: int
    evaluation: str
    variant: str
    server: ModelSpec


def reference_job(**args: Unpack[EvaluationArgs]) -> Manifest:
    """The Job that measures the reference checkpoint where `variant` is evaluated and keeps its figures, and its
    task scores, under reference_prefix."""
    return _job(args, measures_reference=True)


def evaluation_job(**args: Unpack[EvaluationArgs]) -> Manifest:
    """The Job that judges `variant` against the figures its place's reference_job kept."""
    return _job(args, measures_reference=False)


def _job(args: EvaluationArgs, measures_reference: bool) -> Manifest:
    bucket, model, version, variant = args["bucket"], args["model"], args["version"], args["variant"]
    server, mirror, checkpoint_bytes = args["server"], args.get("mirror"), args["checkpoint_bytes"]
    image, where = evaluated_in(variant, server, args.get("converter_image"))
    python = CONVERTER_PYTHON if RECIPES[variant].converter else None  # lm-eval is in the converter image only
    figures_at = reference_prefix(model, version, where)
    prefix = registry_layout.model_prefix(model, version, variant)
    lm_eval = f" --task-scores /in/reference/{TASKS} /out/{TASKS}" if python else ""
    if measures_reference:
        name, session = reference_job_name(model, version, where), access.evaluation_session_name(model, version, where)
        fetched = [(args["checkpoint"], "model"), (args["evaluation"], "data")]
        writes = [figures_at + FIGURES] + ([figures_at + TASKS] if python else [])
        evaluate_args = f"--reference /in/model --data /in/data --save-reference /out/{FIGURES}"
        subject = {"mlinfra.io/reference": f"s3://{bucket}/{args['checkpoint']}"}
    else:
        name, session = job_name(model, version, variant), access.evaluation_session_name(model, version, variant)
        fetched = [(prefix, "model"), (args["evaluation"], "data"), (figures_at, "reference")]
        writes = [quality_key(model, version, variant)]
        evaluate_args = (
            f"--reference-figures /in/reference/{FIGURES} --variant /in/model --data /in/data --out {RESULT}{lm_eval}"
        )
        subject = {
            "mlinfra.io/variant": f"s3://{bucket}/{prefix}",
            "mlinfra.io/reference-figures": f"s3://{bucket}/{figures_at}",
        }
    policy = access.packed(
        access.evaluation_session_policy(args["bucket_arn"], args["key_arn"], [p for p, _ in fetched], writes)
    )
    meta = {
        "name": name,
        "namespace": args["ns"],
        "labels": labels(model, version, REFERENCE if measures_reference else variant, server.accelerator),
        "annotations": {
            "mlinfra.io/run-id": args["run_id"],
            **subject,
            "mlinfra.io/evaluation-data": f"s3://{bucket}/{args['evaluation']}",
            "mlinfra.io/target": ",".join(f"s3://{bucket}/{key}" for key in writes),
            "mlinfra.io/role-session": session,
        },
    }
    env = [{"name": "AWS_REGION", "value": args["region"]}]
    work = [{"name": "work", "mountPath": "/work"}]
    copies = "\n".join(
        f"aws s3 sync --only-show-errors {quote(f's3://{bucket}/{source}')} /work/{into}" for source, into in fetched
    )
    uploads = "\n".join(
        f"aws s3 cp --only-show-errors /out/{key.rsplit('/', 1)[1]} {quote(f's3://{bucket}/{key}')}" for key in writes
    )
    profile = PROFILES[server.accelerator]
    devices = str(server.accelerators_per_replica)
    disk, memory = f"{work_gib(checkpoint_bytes)}Gi", f"{memory_gib(checkpoint_bytes)}Gi"
    # Where lm-eval runs (the converter image, FROM the vLLM server image) it scores the model served by that vLLM
    # with the server's engine flags: the variant as its server runs it, the reference as a bf16 server would.
    as_served = server.model_copy(update={"variant": "cuda", "precision": None}) if measures_reference else server
    serve = engine.engine_settings(as_served, "/in/model").flags() if python else None
    evaluate = {
        "name": "evaluate",
        "image": pulled(mirror, image),
        "command": ["/bin/sh", "-c", evaluate_script(python, evaluate_args, serve)],
        "env": env,
        # What it judges, read-only; only its results are writable.
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
            jobs.credentials_container(mirror, env, access.credentials_script(args["role_arn"], session, policy)),
            jobs.s3_container("fetch", mirror, env, copies, work),
            evaluate,
        ],
        "containers": [
            jobs.s3_container("upload", mirror, env, uploads, [{"name": "out", "mountPath": "/out", "readOnly": True}])
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
                "metadata": {
                    "labels": meta["labels"],
                    "annotations": {**jobs.sidecar_only_credentials(pod), **jobs.SAFE_TO_EVICT},
                },
                "spec": pod,
            },
        },
    }
