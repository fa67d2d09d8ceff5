"""The conversion Jobs: valid Kubernetes objects, placed on the variant's hardware, least registry access."""

from __future__ import annotations

import json

import pytest

from infra.ops.promotion import jobs
from infra.ops.promotion.kube import job_state
from infra.ops.promotion.recipes import VARIANTS
from infra.ops.promotion.sizing import Resources
from infra.serving.aws import converter_access as access
from tests.infra.ops.promotion.standins import CONVERTER_ROLE_ARN, KEY_ARN, credential_process_argv
from tests.k8s_schemas import validate

ARGS = dict(
    bucket="mlinfra-registry-promo",
    bucket_arn="arn:aws:s3:::mlinfra-registry-promo",
    key_arn=KEY_ARN,
    role_arn=CONVERTER_ROLE_ARN,
    region="us-east-1",
    ns="models",
    checkpoint="checkpoints/run-7/step-1000/",
    model="mistral-7b",
    version="2026-03-01",
    run_id="run-7",
    resources=Resources(4, 35, 44),
)


def containers(variant: str) -> dict[str, dict]:
    pod = jobs.conversion_job(variant=variant, **ARGS)["spec"]["template"]["spec"]
    return {c["name"]: c for c in pod["initContainers"] + pod["containers"]}


def assume_role_argv(variant: str) -> list[str]:
    return credential_process_argv(jobs.conversion_job(variant=variant, **ARGS))


@pytest.mark.parametrize("variant", VARIANTS)
def test_objects_validate_against_the_kubernetes_schema(variant):
    objects = jobs.conversion_objects(variant=variant, **ARGS)
    assert [o["kind"] for o in objects] == ["Job"]  # the service account is the serving stack's
    for manifest in objects:
        validate(manifest)


@pytest.mark.parametrize(
    "variant, pool, resource",
    [
        ("neuron", "inf2", "aws.amazon.com/neuron"),
        ("cuda", "g5", "nvidia.com/gpu"),
        ("tensorrt", "g5", "nvidia.com/gpu"),
    ],
)
def test_each_variant_runs_on_its_hardware(variant, pool, resource):
    pod = jobs.conversion_job(variant=variant, **ARGS)["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"mlinfra.io/accelerator": pool}
    assert pod["tolerations"] == [{"key": resource, "operator": "Exists", "effect": "NoSchedule"}]
    convert = next(c for c in pod["initContainers"] if c["name"] == "convert")
    assert convert["resources"]["requests"][resource] == "1" and convert["resources"]["limits"][resource] == "1"
    assert pod.get("schedulerName") == ("my-scheduler" if pool == "inf2" else None)
    assert pod["restartPolicy"] == "Never" and pod["serviceAccountName"] == "model-converter"


def test_the_job_reads_the_checkpoint_and_writes_only_its_variant_prefix():
    job = jobs.conversion_job(variant="neuron", **ARGS)
    pod = job["spec"]["template"]["spec"]
    fetch, upload = pod["initContainers"][1], pod["containers"][0]
    assert fetch["command"][-2:] == ["s3://mlinfra-registry-promo/checkpoints/run-7/step-1000/", "/work/checkpoint"]
    target = "s3://mlinfra-registry-promo/models/mistral-7b/2026-03-01/neuron/"
    assert target in upload["command"][-1] and upload["command"][-1].endswith(f"{target}conversion.json")


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_job_down_scopes_its_role_before_touching_s3(variant):
    pod = jobs.conversion_job(variant=variant, **ARGS)["spec"]["template"]["spec"]
    steps = containers(variant)
    assert [c["name"] for c in pod["initContainers"]] == ["credentials", "fetch", "convert"]
    assert {"name": "aws", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}} in pod["volumes"]
    argv = assume_role_argv(variant)
    assert argv[:5] == ["exec", "env", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "aws"]
    options = dict(zip(argv[7::2], argv[8::2], strict=True))
    assert argv[5:7] == ["sts", "assume-role"]
    assert options["--role-arn"] == CONVERTER_ROLE_ARN
    assert options["--role-session-name"] == f"promote-mistral-7b-2026-03-01-{variant}"
    assert options["--duration-seconds"] == "3600"
    assert json.loads(options["--policy"]) == access.session_policy(
        ARGS["bucket_arn"], KEY_ARN, "run-7", "mistral-7b", "2026-03-01", variant
    )
    script = steps["credentials"]["command"][-1]
    assert f"credential_process = /bin/sh {access.PROCESS_FILE}" in script
    assert "aws sts get-caller-identity" in script  # proves the down-scoped session before any S3 call
    for name in ("fetch", "upload"):  # the S3 steps read the down-scoped credentials only
        assert {"name": "AWS_CONFIG_FILE", "value": "/aws/config"} in steps[name]["env"]
        assert {"name": "aws", "mountPath": "/aws", "readOnly": True} in steps[name]["volumeMounts"]
    convert = steps["convert"]
    assert "aws" not in {m["name"] for m in convert["volumeMounts"]}
    assert "unset AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE" in convert["command"][-1]


@pytest.mark.parametrize("variant", VARIANTS)
def test_pod_identity_injects_no_credentials_into_the_convert_step(variant):
    template = jobs.conversion_job(variant=variant, **ARGS)["spec"]["template"]
    # The EKS Pod Identity webhook reads the pod's annotation (not the Job's): comma-separated container names.
    assert template["metadata"]["annotations"]["eks.amazonaws.com/skip-containers"] == "convert"
    names = [c["name"] for c in template["spec"]["initContainers"] + template["spec"]["containers"]]
    assert "convert" in names  # the annotation names a container that exists
    # The S3 steps keep the pod's credentials (they assume the down-scoped session with them).
    assert set(template["metadata"]["annotations"]["eks.amazonaws.com/skip-containers"].split(",")) == {"convert"}


@pytest.mark.parametrize("variant", VARIANTS)
def test_node_loss_is_retried_and_a_conversion_error_fails_the_job(variant):
    job = jobs.conversion_job(variant=variant, **ARGS)
    spec = job["spec"]
    assert spec["backoffLimit"] == 2
    assert spec["template"]["spec"]["restartPolicy"] == "Never"  # podFailurePolicy requires it
    assert spec["podFailurePolicy"] == {
        "rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            {"action": "FailJob", "onExitCodes": {"containerName": "convert", "operator": "NotIn", "values": [0]}},
        ]
    }
    assert spec["template"]["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"
    validate(job)
    broken = json.loads(json.dumps(job))
    broken["spec"]["podFailurePolicy"]["rules"][1]["onExitCode"] = broken["spec"]["podFailurePolicy"]["rules"][1].pop(
        "onExitCodes"
    )
    with pytest.raises(Exception, match="onExitCode"):
        validate(broken)


def test_the_convert_step_and_work_volume_are_sized_from_the_checkpoint():
    pod = jobs.conversion_job(variant="neuron", **ARGS)["spec"]["template"]["spec"]
    convert = next(c for c in pod["initContainers"] if c["name"] == "convert")
    assert convert["resources"] == {
        "requests": {"cpu": "4", "memory": "35Gi", "ephemeral-storage": "44Gi", "aws.amazon.com/neuron": "1"},
        "limits": {"memory": "35Gi", "aws.amazon.com/neuron": "1"},
    }
    assert {"name": "work", "emptyDir": {"sizeLimit": "44Gi"}} in pod["volumes"]
    # The pod's request is its largest init step's: convert asks for more than every other step.
    others = [c for c in pod["initContainers"] + pod["containers"] if c["name"] != "convert"]
    assert {c["resources"]["requests"]["memory"] for c in others} <= {"256Mi", "1Gi"}
    assert {c["resources"]["requests"]["cpu"] for c in others} <= {"100m", "1"}


def test_long_names_stay_dns_labels_and_distinct():
    a = jobs.job_name("a" * 32, "v" * 40 + "1", "tensorrt")
    b = jobs.job_name("a" * 32, "v" * 40 + "2", "tensorrt")
    assert len(a) <= 63 and a != b and a[-1].isalnum()


def test_job_status_conditions():
    assert job_state({"status": {"active": 1}}).state == "running"
    assert job_state({"status": {}}).state == "pending"
    assert job_state({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}).state == "succeeded"
    failed = job_state({"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]}})
    assert (failed.state, failed.detail) == ("failed", "DeadlineExceeded")
