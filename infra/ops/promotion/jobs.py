"""The conversion Jobs, as whole Kubernetes objects (pure): one Job per variant.

A Job runs as the serving stack's `model-converter` service account, on the hardware its variant is for
(neuron on an inf2 node, cuda on a g5 node), in the image of the model server that will serve it:
  1. sidecar `credentials` (aws-cli) the only step with the pod's own credentials: assumes the converter role
                                    with this promotion's session policy (read checkpoints/<run-id>/ and a
                                    calibrated variant's datasets/calibration/<name>/, write
                                    models/<name>/<version>/<variant>/; see converter_access.py), proves it
                                    once before anything is read, and re-assumes before each session ends;
                                    the S3 steps' CLI config prints its latest session;
  2. init `fetch`   (aws-cli)       copies the checkpoint to /work/checkpoint (and a calibrated variant's
                                    calibration data to /work/calibration);
  3. init `convert` (server image)  builds /work/out (Neuron: compiles it on the devices for the server's
                                    engine shape, neuron-int8 after NxD Inference wrote its quantized
                                    checkpoint on the CPU; cuda: re-saves it on the CPU; cuda-fp8, cuda-int8,
                                    cuda-int4: llm-compressor on the devices, in the converter image);
  4. init `publish` (aws-cli)      for a server that streams its artefact from S3 (every CUDA server on EKS):
                                    copies /work/out to models/<name>/<version>/<variant>/ first;
  5. init `check`   (server image)  loads the artefact as its server will, with the server's engine settings on
                                    the accelerator, and generates (the smoke test: no variant reaches a
                                    manifest, hence the alias, without it): a streaming server's from S3 with the
                                    streamer (the same load format, the down-scoped session through the CLI
                                    config, as boto3 and the streamer's C++ client read it), a Neuron server's
                                    from /work/out mounted read-only at /served, as its copy on the node is
                                    mounted; then writes /work/conversion.json: versions, node, the check's
                                    figures, and size + sha256 of every file;
  6. `upload`       (aws-cli)       copies /work/out there too (Neuron), then the report, last.
`fetch`, `publish`, `upload` and a streaming `check` get only the down-scoped session, `convert` and a local `check`
no AWS credentials at all (see sidecar_only_credentials).

The `convert` and `check` steps are sized from the checkpoint (sizing.py) and the work volume holds
checkpoint, intermediates and artefact. The pod holds its accelerators from start to end (Kubernetes sizes a
pod by its largest init step), so a cuda re-save on the CPU still waits for a GPU node. A pod lost with its
node (Spot reclaim, drain) is retried without counting against the backoff limit; a conversion or check
error fails the Job at once (podFailurePolicy).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from shlex import quote
from typing import Any, TypedDict

from infra.core.naming import slug
from infra.ops.promotion.recipes import CALIBRATION_DIR, CHECK_PROGRAM, RECIPES, Recipe, step_image
from infra.ops.promotion.sizing import Resources
from infra.registry import layout as registry_layout
from infra.serving import engine
from infra.serving.aws import converter_access as access
from infra.serving.aws.mirror import Mirror, pulled
from infra.serving.scheduling import ACCELERATOR_LABEL, taint
from infra.serving.servers import AWS_CLI_IMAGE, PROFILES, shm_mount, shm_volume, streamed_load
from infra.serving.spec import ModelSpec
from infra.serving.variants import VARIANTS

Manifest = dict[str, Any]
DEADLINE_SECONDS = 4 * 3600  # a Neuron compile of a 70B model takes hours, not days
KEEP_FINISHED_SECONDS = 7 * 24 * 3600  # finished Jobs (and their logs) stay a week
BACKOFF_LIMIT = 2  # retries of a failed fetch/upload (S3 hiccups); node loss is not counted
# The EKS Pod Identity webhook injects no credentials (env, token mount) into the containers this pod
# annotation lists (initContainers too): aws/amazon-eks-pod-identity-webhook, pkg/annotations/constants.go
# (SkipContainersAnnotation = "skip-containers", under the "eks.amazonaws.com" prefix) and its test pod
# pkg/handler/testdata/containercredentials/rawPodSkip.pod.yaml (Pod Identity's container credentials).
SKIP_CREDENTIALS_ANNOTATION = "eks.amazonaws.com/skip-containers"
# The cluster autoscaler never removes a node to consolidate while a conversion runs on it.
SAFE_TO_EVICT = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}

SERVED = "/served"  # where `check` sees the artefact, read-only, as a server does
_NO_CREDENTIALS = "unset AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE\n"
# The load-and-generate program, written into the work volume by `convert` (it runs in the server image).
ENGINE_CHECK = (Path(__file__).parent / "engine_check.py").read_text(encoding="utf-8")
# The programs a recipe's `convert` runs (its `programs`), shipped the same way.
PROGRAMS = {
    name: (Path(__file__).parent / name).read_text(encoding="utf-8") for r in RECIPES.values() for name in r.programs
}
_REPORT_SCRIPT = """import hashlib, json, os, sys
files = []
for root, _, names in os.walk("/work/out"):
    for name in sorted(names):
        path = os.path.join(root, name)
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        files.append({"path": os.path.relpath(path, "/work/out"), "size": os.path.getsize(path),
                      "sha256": digest.hexdigest()})
with open("/work/check.json") as handle:
    check = json.load(handle)
report = {"compilerVersion": sys.argv[1], "runtimeVersion": sys.argv[2], "node": os.environ.get("NODE_NAME"),
          "check": check, "files": files}
with open("/work/conversion.json", "w") as handle:
    json.dump(report, handle)
"""


class JobInputs(TypedDict):
    """What the conversion and evaluation Jobs of one promotion are both built from."""

    bucket: str
    bucket_arn: str
    key_arn: str
    role_arn: str
    region: str
    ns: str
    checkpoint: str
    model: str
    version: str
    run_id: str
    mirror: Mirror | None
    converter_image: str | None  # llm-compressor's and lm-eval's image (mlinfra:serving.converterImage)


def engine_keywords(server: ModelSpec, artefact_dir: str) -> str:
    """$ENGINE of a step: the server's engine keywords (JSON) with the artefact seen at `artefact_dir`, and the load
    format that reads it there (servers.streamed_load: the streamer for an s3:// URI)."""
    keywords = {**engine.engine_settings(server, artefact_dir).keywords(), **streamed_load(artefact_dir)}
    return json.dumps(keywords, sort_keys=True)


def job_name(model: str, version: str, variant: str, verb: str = "convert") -> str:
    """<verb>-<model>-<version>-<variant>, a DNS label (<= 63) made unique by a hash when shortened."""
    full = f"{verb}-{model}-{version}-{variant}"
    name = slug(full, 63)
    if name == full.lower() and len(full) <= 63:
        return name
    return f"{slug(full, 56)}-{hashlib.sha256(full.encode()).hexdigest()[:6]}"


def artefact_prefix(model: str, version: str, variant: str) -> str:
    return registry_layout.model_prefix(model, version, variant)


def labels(model: str, version: str, variant: str, accelerator: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "model-conversion",
        "app.kubernetes.io/instance": model,
        "app.kubernetes.io/version": slug(version, 63),
        "app.kubernetes.io/component": variant,
        "app.kubernetes.io/managed-by": "mlinfra",
        ACCELERATOR_LABEL: accelerator,
    }


def session_policy(
    *,
    bucket_arn: str,
    key_arn: str,
    run_id: str,
    model: str,
    version: str,
    variant: str,
    calibration: str | None = None,
) -> str:
    """The Job's session policy as sent to STS (compact JSON, checked against the size limit)."""
    return access.packed(access.session_policy(bucket_arn, key_arn, run_id, model, version, variant, calibration))


def pod_failure_policy() -> dict[str, Any]:
    """Node loss (the pod gets the DisruptionTarget condition: Spot reclaim, drain, eviction) is retried and not
    counted; a failing `convert` or `check` step is a conversion error, which a retry would repeat: fail the Job.
    Other failures (fetch, upload) count against BACKOFF_LIMIT. Needs restartPolicy: Never."""
    return {
        "rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            *(
                {"action": "FailJob", "onExitCodes": {"containerName": step, "operator": "NotIn", "values": [0]}}
                for step in ("convert", "check")
            ),
        ]
    }


def conversion_job(
    *,
    bucket: str,
    bucket_arn: str,
    key_arn: str,
    role_arn: str,
    region: str,
    ns: str,
    checkpoint: str,
    model: str,
    version: str,
    variant: str,
    run_id: str,
    resources: Resources,
    server: ModelSpec,
    mirror: Mirror | None = None,
    calibration: str | None = None,
    converter_image: str | None = None,
) -> Manifest:
    """`server`: the model entry that will serve this variant (its pool, image and engine settings): the Job runs
    on that pool; `mirror`: the serving stack's image mirror, which every image of the Job comes through;
    `calibration`: the registry prefix of the calibration data (datasets/calibration/<name>/), which a calibrated
    variant's Job fetches and no other reads; `converter_image`: where a converter recipe's `convert` runs
    (llm-compressor's image; the server's image runs every other step)."""

    recipe = RECIPES[variant]
    convert_image = step_image(variant, server.image, converter_image)
    if VARIANTS[variant].calibrated != (calibration is not None):
        raise ValueError(
            f"{variant}: calibration data {calibration!r}, but calibrated is {VARIANTS[variant].calibrated}"
        )
    pool = server.accelerator
    profile = PROFILES[pool]
    devices = str(server.accelerators_per_replica)
    name = job_name(model, version, variant)
    target = f"s3://{bucket}/{artefact_prefix(model, version, variant)}"
    streamed = not profile.fetch_to_disk  # the server streams the artefact from S3 (manifests.py): so does the check
    checked = target if streamed else SERVED  # where `check` loads the artefact from
    session = access.session_name(model, version, variant)
    policy = session_policy(
        bucket_arn=bucket_arn,
        key_arn=key_arn,
        run_id=run_id,
        model=model,
        version=version,
        variant=variant,
        calibration=calibration,
    )
    meta = {
        "name": name,
        "namespace": ns,
        "labels": labels(model, version, variant, pool),
        "annotations": {
            "mlinfra.io/run-id": run_id,
            "mlinfra.io/checkpoint": f"s3://{bucket}/{checkpoint}",
            **({"mlinfra.io/calibration-data": f"s3://{bucket}/{calibration}"} if calibration is not None else {}),
            "mlinfra.io/target": target,
            "mlinfra.io/role-session": session,
        },
    }
    env = [{"name": "AWS_REGION", "value": region}]
    mount = [{"name": "work", "mountPath": "/work"}]
    secure = {"allowPrivilegeEscalation": False}
    credentials = credentials_container(mirror, env, access.credentials_script(role_arn, session, policy))
    copies = [(checkpoint, "/work/checkpoint")] + ([(calibration, CALIBRATION_DIR)] if calibration is not None else [])
    fetch = s3_container(
        "fetch",
        mirror,
        env,
        "\n".join(
            f"aws s3 sync --only-show-errors {quote(f's3://{bucket}/{source}')} {into}" for source, into in copies
        ),
        mount,
    )
    memory, disk = f"{resources.memory_gib:g}Gi", f"{resources.disk_gib:g}Gi"
    sized = {"cpu": f"{resources.cpu:g}", "memory": memory, "ephemeral-storage": disk}
    on_devices = {**sized, profile.resource: devices}
    node = {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    # The server's engine; a neuron-int8 quantized checkpoint's path as each step sees the artefact (engine.py).
    engine_env = {
        step: env + [{"name": "ENGINE", "value": engine_keywords(server, artefact)}, node]
        for step, artefact in (("convert", "/work/out"), ("check", checked))
    }
    convert = {
        "name": "convert",
        "image": pulled(mirror, convert_image),
        "command": ["/bin/sh", "-c", convert_script(recipe)],
        "env": engine_env["convert"],
        "volumeMounts": [*mount, shm_mount()],
        "securityContext": secure,
        # The pod asks for its largest init step. The work volume counts as ephemeral storage.
        "resources": {
            "requests": on_devices if recipe.convert_on_accelerator else sized,
            "limits": {"memory": memory, **({profile.resource: devices} if recipe.convert_on_accelerator else {})},
        },
    }
    check = {
        "name": "check",
        "image": pulled(mirror, server.image),
        "command": ["/bin/sh", "-c", check_script(recipe, checked)],
        "env": engine_env["check"]
        + [{"name": name, "value": value} for name, value in recipe.check_env]
        + (session_env() if streamed else []),
        # A local artefact as a server sees it: read-only, so a load that would compile again fails here.
        "volumeMounts": [
            *mount,
            *(
                [session_mount()]
                if streamed
                else [{"name": "work", "mountPath": SERVED, "subPath": "out", "readOnly": True}]
            ),
            shm_mount(),
        ],
        "securityContext": secure,
        "resources": {"requests": on_devices, "limits": {"memory": memory, profile.resource: devices}},
    }
    sync = f"aws s3 sync --only-show-errors /work/out {quote(target)}"
    publish = s3_container("publish", mirror, env, sync, mount)
    upload = s3_container(
        "upload",
        mirror,
        env,
        ("" if streamed else f"{sync}\n")
        + f"aws s3 cp --only-show-errors /work/conversion.json {quote(target + 'conversion.json')}",
        mount,
    )
    pod: dict[str, Any] = {
        "serviceAccountName": access.SERVICE_ACCOUNT,
        "restartPolicy": "Never",
        "nodeSelector": {ACCELERATOR_LABEL: pool},
        "tolerations": [taint(pool).toleration()],
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "initContainers": [credentials, fetch, convert, *([publish] if streamed else []), check],
        "containers": [upload],
        "volumes": [
            {"name": "work", "emptyDir": {"sizeLimit": disk}},
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
            "backoffLimit": BACKOFF_LIMIT,
            "podFailurePolicy": pod_failure_policy(),
            "activeDeadlineSeconds": DEADLINE_SECONDS,
            "ttlSecondsAfterFinished": KEEP_FINISHED_SECONDS,
            "template": {
                "metadata": {
                    "labels": meta["labels"],
                    "annotations": {**sidecar_only_credentials(pod), **SAFE_TO_EVICT},
                },
                "spec": pod,
            },
        },
    }


def credentials_container(mirror: Mirror | None, env: list[dict[str, Any]], script: str) -> dict[str, Any]:
    """The `credentials` sidecar: the only step with the pod's own credentials (converter_access.py)."""
    return {
        "name": "credentials",
        "image": pulled(mirror, AWS_CLI_IMAGE),
        "env": env,
        "securityContext": {"allowPrivilegeEscalation": False},
        "command": ["/bin/sh", "-c", script],
        "volumeMounts": [{"name": "aws", "mountPath": access.CREDENTIALS_DIR}],
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
        # A sidecar (Kubernetes 1.29+): it runs beside every later step and stops after the last; the next step
        # starts once its startup probe passes, i.e. once the first assume has succeeded or failed.
        "restartPolicy": "Always",
        "startupProbe": {
            "exec": {"command": ["test", "-e", access.READY_FILE]},
            "periodSeconds": 2,
            "failureThreshold": 150,
        },
    }


def sidecar_only_credentials(pod: dict[str, Any]) -> dict[str, str]:
    """The pod annotation that keeps Pod Identity's (full-role) credentials out of every step but the `credentials`
    sidecar: the S3 steps read its down-scoped session, the others need none."""
    steps = [c["name"] for c in pod["initContainers"] + pod["containers"] if c["name"] != "credentials"]
    return {SKIP_CREDENTIALS_ANNOTATION: ",".join(steps)}


def session_env() -> list[dict[str, str]]:
    """What points a step's AWS SDKs (the CLI, boto3, the streamer's C++ client) at the sidecar's session only."""
    return [
        {"name": "AWS_CONFIG_FILE", "value": access.CONFIG_FILE},
        {"name": "AWS_SHARED_CREDENTIALS_FILE", "value": "/dev/null"},
    ]


def session_mount() -> dict[str, Any]:
    return {"name": "aws", "mountPath": access.CREDENTIALS_DIR, "readOnly": True}


def s3_container(
    name: str, mirror: Mirror | None, env: list[dict[str, Any]], command: str, mounts: list[dict[str, Any]]
) -> dict[str, Any]:
    """An S3 step (aws-cli): it reads the down-scoped credentials through the config `credentials` writes,
    nothing else (converter_access.s3_step)."""
    return {
        "name": name,
        "image": pulled(mirror, AWS_CLI_IMAGE),
        "env": env + session_env(),
        "volumeMounts": mounts + [session_mount()],
        "securityContext": {"allowPrivilegeEscalation": False},
        "command": ["/bin/sh", "-c", access.s3_step(command)],
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
    }


def conversion_objects(**kwargs: Any) -> list[Manifest]:
    """What the Jobs port creates for one variant: its Job (the service account belongs to the serving stack)."""
    return [conversion_job(**kwargs)]


def convert_script(recipe: Recipe) -> str:
    # Neither step needs AWS access. The pod annotation keeps Pod Identity from injecting credentials
    # here; the unset is a second guard (should the webhook ignore the annotation).
    programs = "".join(f"cat > /work/{name} <<'PY'\n{PROGRAMS[name]}PY\n" for name in recipe.programs)
    return (
        f"set -eu\n{_NO_CREDENTIALS}"
        f"mkdir -p /work/out\ncat > {CHECK_PROGRAM} <<'PY'\n{ENGINE_CHECK}PY\n{programs}"
        f"{recipe.convert}\n"
    )


def check_script(recipe: Recipe, source: str = SERVED) -> str:
    """The check of the artefact at `source`: a path, or an s3:// URI read with the down-scoped session only."""
    body = (
        f'python3 {CHECK_PROGRAM} {quote(source)} "$ENGINE" /work/check.json\n'
        f'compiler="$({recipe.compiler_version} 2>/dev/null || echo unknown)"\n'
        f'runtime="$({recipe.runtime_version} 2>/dev/null || echo unknown)"\n'
        f'python3 - "$compiler" "$runtime" <<\'PY\'\n{_REPORT_SCRIPT}PY'
    )
    return access.s3_step(body) if streamed_load(source) else f"set -eu\n{_NO_CREDENTIALS}{body}\n"


def manifest_facts(recipe: Recipe, server: ModelSpec) -> dict[str, Any]:
    """What the manifest records about the recipe (the job's report adds versions, node, check and files)."""
    return {
        "variant": recipe.variant,
        "format": recipe.format,
        "precision": recipe.precision,
        "image": server.image,
        "engine": engine.engine_settings(server).keywords(),
        "hardware": {"accelerator": server.accelerator, "resource": PROFILES[server.accelerator].resource},
    }
