"""The conversion Jobs, as whole Kubernetes objects (pure): one Job per variant.

A Job runs as the serving stack's `model-converter` service account, on the hardware its variant is for
(neuron on an inf2 node, cuda/tensorrt on a g5 node):
  1. init `credentials` (aws-cli)   writes the AWS CLI config of the S3 steps: its credential_process
                                    assumes the converter role with this promotion's session policy
                                    (read checkpoints/<run-id>/, write models/<name>/<version>/<variant>/;
                                    see access.py), and proves it once before anything is read;
  2. init `fetch`   (aws-cli)       copies the checkpoint to /work/checkpoint;
  3. init `convert` (variant image) builds /work/out on the accelerator and writes /work/conversion.json:
                                    compiler and runtime versions, node, and size + sha256 of every file;
                                    it gets no AWS credentials at all (see CONVERT_HAS_NO_CREDENTIALS);
  4. `upload`       (aws-cli)       copies /work/out to models/<name>/<version>/<variant>/, the report last.

The `convert` step is sized from the checkpoint (sizing.py) and the work volume holds checkpoint,
intermediates and artefact. A pod lost with its node (Spot reclaim, drain) is retried without counting
against the backoff limit; a conversion error fails the Job at once (podFailurePolicy).
"""

from __future__ import annotations

import hashlib
from typing import Any

from infra.core.naming import slug
from infra.ops.promotion.recipes import RECIPES, Recipe
from infra.ops.promotion.sizing import Resources
from infra.registry import layout as registry_layout
from infra.serving.aws import converter_access as access
from infra.serving.scheduling import ACCELERATOR_LABEL, taint
from infra.serving.servers import AWS_CLI_IMAGE

Manifest = dict[str, Any]
DEADLINE_SECONDS = 4 * 3600  # a Neuron compile of a 70B model takes hours, not days
KEEP_FINISHED_SECONDS = 7 * 24 * 3600  # finished Jobs (and their logs) stay a week
BACKOFF_LIMIT = 2  # retries of a failed fetch/upload (S3 hiccups); node loss is not counted
# The EKS Pod Identity webhook injects no credentials (env, token mount) into the containers this pod
# annotation lists (initContainers too): aws/amazon-eks-pod-identity-webhook, pkg/annotations/constants.go
# (SkipContainersAnnotation = "skip-containers", under the "eks.amazonaws.com" prefix) and its test pod
# pkg/handler/testdata/containercredentials/rawPodSkip.pod.yaml (Pod Identity's container credentials).
SKIP_CREDENTIALS_ANNOTATION = "eks.amazonaws.com/skip-containers"
CONVERT_HAS_NO_CREDENTIALS = {SKIP_CREDENTIALS_ANNOTATION: "convert"}
# The cluster autoscaler never removes a node to consolidate while a conversion runs on it.
SAFE_TO_EVICT = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}

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
report = {"compilerVersion": sys.argv[1], "runtimeVersion": sys.argv[2], "node": os.environ.get("NODE_NAME"),
          "files": files}
with open("/work/conversion.json", "w") as handle:
    json.dump(report, handle)
"""


def job_name(model: str, version: str, variant: str) -> str:
    """convert-<model>-<version>-<variant>, a DNS label (<= 63) made unique by a hash when shortened."""
    full = f"convert-{model}-{version}-{variant}"
    name = slug(full, 63)
    if name == full.lower() and len(full) <= 63:
        return name
    return f"{slug(full, 56)}-{hashlib.sha256(full.encode()).hexdigest()[:6]}"


def artefact_prefix(model: str, version: str, variant: str) -> str:
    return registry_layout.model_prefix(model, version, variant)


def labels(model: str, version: str, variant: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "model-conversion",
        "app.kubernetes.io/instance": model,
        "app.kubernetes.io/version": slug(version, 63),
        "app.kubernetes.io/component": variant,
        "app.kubernetes.io/managed-by": "mlinfra",
        ACCELERATOR_LABEL: RECIPES[variant].accelerator,
    }


def session_policy(*, bucket_arn: str, key_arn: str, run_id: str, model: str, version: str, variant: str) -> str:
    """The Job's session policy as sent to STS (compact JSON, checked against the size limit)."""
    return access.packed(access.session_policy(bucket_arn, key_arn, run_id, model, version, variant))


def pod_failure_policy() -> dict[str, Any]:
    """Node loss (the pod gets the DisruptionTarget condition: Spot reclaim, drain, eviction) is retried and not
    counted; a failing `convert` step is a conversion error, which a retry would repeat: fail the Job.
    Other failures (fetch, upload) count against BACKOFF_LIMIT. Needs restartPolicy: Never."""
    return {
        "rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            {"action": "FailJob", "onExitCodes": {"containerName": "convert", "operator": "NotIn", "values": [0]}},
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
) -> Manifest:
    recipe = RECIPES[variant]
    name = job_name(model, version, variant)
    target = f"s3://{bucket}/{artefact_prefix(model, version, variant)}"
    session = access.session_name(model, version, variant)
    policy = session_policy(
        bucket_arn=bucket_arn, key_arn=key_arn, run_id=run_id, model=model, version=version, variant=variant
    )
    meta = {
        "name": name,
        "namespace": ns,
        "labels": labels(model, version, variant),
        "annotations": {
            "mlinfra.io/run-id": run_id,
            "mlinfra.io/checkpoint": f"s3://{bucket}/{checkpoint}",
            "mlinfra.io/target": target,
            "mlinfra.io/role-session": session,
        },
    }
    env = [{"name": "AWS_REGION", "value": region}]
    mount = [{"name": "work", "mountPath": "/work"}]
    secure = {"allowPrivilegeEscalation": False}
    # The S3 steps read the down-scoped credentials through the config `credentials` writes.
    s3_env = env + [{"name": "AWS_CONFIG_FILE", "value": access.CONFIG_FILE}]
    s3_mount = mount + [{"name": "aws", "mountPath": access.CREDENTIALS_DIR, "readOnly": True}]
    credentials = {
        "name": "credentials",
        "image": AWS_CLI_IMAGE,
        "env": env,
        "securityContext": secure,
        "command": ["/bin/sh", "-c", access.credentials_script(role_arn, session, policy)],
        "volumeMounts": [{"name": "aws", "mountPath": access.CREDENTIALS_DIR}],
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
    }
    fetch = {
        "name": "fetch",
        "image": AWS_CLI_IMAGE,
        "env": s3_env,
        "volumeMounts": s3_mount,
        "securityContext": secure,
        "command": ["aws", "s3", "sync", "--only-show-errors", f"s3://{bucket}/{checkpoint}", "/work/checkpoint"],
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
    }
    memory, disk = f"{resources.memory_gib:g}Gi", f"{resources.disk_gib:g}Gi"
    convert = {
        "name": "convert",
        "image": recipe.image,
        "command": ["/bin/sh", "-c", convert_script(recipe)],
        "env": env + [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "volumeMounts": mount,
        "securityContext": secure,
        # The pod asks for the largest init step: this one. The work volume counts as ephemeral storage.
        "resources": {
            "requests": {
                "cpu": f"{resources.cpu:g}",
                "memory": memory,
                "ephemeral-storage": disk,
                recipe.resource: "1",
            },
            "limits": {"memory": memory, recipe.resource: "1"},
        },
    }
    upload = {
        "name": "upload",
        "image": AWS_CLI_IMAGE,
        "env": s3_env,
        "volumeMounts": s3_mount,
        "securityContext": secure,
        "command": [
            "/bin/sh",
            "-c",
            f"aws s3 sync --only-show-errors /work/out {target} && "
            f"aws s3 cp --only-show-errors /work/conversion.json {target}conversion.json",
        ],
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
    }
    pod: dict[str, Any] = {
        "serviceAccountName": access.SERVICE_ACCOUNT,
        "restartPolicy": "Never",
        "nodeSelector": {ACCELERATOR_LABEL: recipe.accelerator},
        "tolerations": [taint(recipe.accelerator).toleration()],  # type: ignore[arg-type]
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "initContainers": [credentials, fetch, convert],
        "containers": [upload],
        "volumes": [
            {"name": "work", "emptyDir": {"sizeLimit": disk}},
            {"name": "aws", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
        ],
    }
    if recipe.scheduler_name:
        pod["schedulerName"] = recipe.scheduler_name
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
                "metadata": {"labels": meta["labels"], "annotations": {**CONVERT_HAS_NO_CREDENTIALS, **SAFE_TO_EVICT}},
                "spec": pod,
            },
        },
    }


def conversion_objects(**kwargs: Any) -> list[Manifest]:
    """What the Jobs port creates for one variant: its Job (the service account belongs to the serving stack)."""
    return [conversion_job(**kwargs)]


def convert_script(recipe: Recipe) -> str:
    # The conversion needs no AWS access. The pod annotation keeps Pod Identity from injecting credentials
    # here; the unset is a second guard (should the webhook ignore the annotation).
    return (
        "set -eu\nunset AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE\n"
        "mkdir -p /work/out\n"
        f"{recipe.convert}\n"
        f'compiler="$({recipe.compiler_version} 2>/dev/null || echo unknown)"\n'
        f'runtime="$({recipe.runtime_version} 2>/dev/null || echo unknown)"\n'
        f'python3 - "$compiler" "$runtime" <<\'PY\'\n{_REPORT_SCRIPT}PY\n'
    )


def manifest_facts(recipe: Recipe) -> dict[str, Any]:
    """What the manifest records about the recipe (the job's report adds versions, node and files)."""
    return {
        "variant": recipe.variant,
        "format": recipe.format,
        "precision": recipe.precision,
        "image": recipe.image,
        "hardware": {"accelerator": recipe.accelerator, "resource": recipe.resource},
    }
