"""The conversion Jobs: valid Kubernetes objects, placed on the variant's hardware, least registry access."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.ops.promotion import jobs
from infra.ops.promotion.kube import job_state
from infra.ops.promotion.recipes import RECIPES, VARIANTS
from infra.ops.promotion.sizing import Resources
from infra.serving import engine, manifests, servers
from infra.serving.aws import converter_access as access
from infra.serving.spec import ModelSpec
from infra.serving.variants import facts
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
    resources=Resources(4, 35, 44, 1),
)
SERVERS = {
    "neuron": ModelSpec.model_validate(
        {
            "name": "mistral-7b",
            "version": "2026-03-01",
            "accelerator": "inf2",
            "image": "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.16.0-neuronx-py312-sdk2.31.1-ubuntu24.04",
            "maxNumSeqs": 4,
            "maxModelLen": 8192,
        }
    ),
    "cuda": ModelSpec.model_validate(
        {"name": "mistral-7b", "version": "2026-03-01", "accelerator": "g5", "image": "vllm/vllm-openai:v0.33.0"}
    ),
    "neuron-int8": ModelSpec.model_validate(
        {
            "name": "mistral-7b",
            "version": "2026-03-01",
            "accelerator": "inf2",
            "image": "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.16.0-neuronx-py312-sdk2.31.1-ubuntu24.04",
            "variant": "neuron-int8",
            "maxNumSeqs": 4,
            "maxModelLen": 8192,
        }
    ),
} | {
    variant: ModelSpec.model_validate(
        {
            "name": "mistral-7b",
            "version": "2026-03-01",
            "accelerator": pool,
            "image": "vllm/vllm-openai:v0.33.0",
            "variant": variant,
        }
    )
    for variant, pool in (("cuda-fp8", "g6"), ("cuda-int8", "g5"), ("cuda-int4", "g5"))
}


CALIBRATION = "datasets/calibration/chat-512/"
CONVERTER = "123456789012.dkr.ecr.us-east-1.amazonaws.com/mlinfra-converter:0.33.0-llmc0.14.0.1"


def job_args(variant: str) -> dict:
    """ARGS, the variant's server, the calibration data when its quantiser reads it and the serving stack's
    converter image (promote passes them)."""
    return {
        **ARGS,
        "server": SERVERS[variant],
        "calibration": CALIBRATION if facts(variant).calibrated else None,
        "converter_image": CONVERTER,
    }


def conversion(variant: str, **changes) -> dict:
    return jobs.conversion_job(variant=variant, **{**job_args(variant), **changes})


def containers(variant: str) -> dict[str, dict]:
    pod = conversion(variant)["spec"]["template"]["spec"]
    return {c["name"]: c for c in pod["initContainers"] + pod["containers"]}


def assume_role_argv(variant: str) -> list[str]:
    return credential_process_argv(conversion(variant))


@pytest.mark.parametrize("variant", VARIANTS)
def test_objects_validate_against_the_kubernetes_schema(variant):
    objects = jobs.conversion_objects(variant=variant, **job_args(variant))
    assert [o["kind"] for o in objects] == ["Job"]  # the service account is the serving stack's
    for manifest in objects:
        validate(manifest)


@pytest.mark.parametrize(
    "variant, pool, resource",
    [
        ("neuron", "inf2", "aws.amazon.com/neuron"),
        ("neuron-int8", "inf2", "aws.amazon.com/neuron"),
        ("cuda", "g5", "nvidia.com/gpu"),
        ("cuda-fp8", "g6", "nvidia.com/gpu"),  # fp8 compute: L4 (8.9); the A10G of g5 has none
        ("cuda-int8", "g5", "nvidia.com/gpu"),
        ("cuda-int4", "g5", "nvidia.com/gpu"),
    ],
)
def test_each_variant_runs_on_its_hardware(variant, pool, resource):
    pod = conversion(variant)["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"mlinfra.io/accelerator": pool}
    assert pod["tolerations"] == [{"key": resource, "operator": "Exists", "effect": "NoSchedule"}]
    check = next(c for c in pod["initContainers"] if c["name"] == "check")
    assert check["resources"]["requests"][resource] == "1" and check["resources"]["limits"][resource] == "1"
    assert pod.get("schedulerName") == ("my-scheduler" if pool == "inf2" else None)
    assert pod["restartPolicy"] == "Never" and pod["serviceAccountName"] == "model-converter"


def test_the_job_reads_the_checkpoint_and_writes_only_its_variant_prefix():
    job = conversion("neuron")
    pod = job["spec"]["template"]["spec"]
    fetch, upload = pod["initContainers"][1], pod["containers"][0]
    assert fetch["command"][-1].splitlines()[-1] == (
        "aws s3 sync --only-show-errors s3://mlinfra-registry-promo/checkpoints/run-7/step-1000/ /work/checkpoint"
    )
    target = "s3://mlinfra-registry-promo/models/mistral-7b/2026-03-01/neuron/"
    assert upload["command"][-1].splitlines()[-2:] == [
        f"aws s3 sync --only-show-errors /work/out {target}",
        f"aws s3 cp --only-show-errors /work/conversion.json {target}conversion.json",
    ]


@pytest.mark.parametrize("variant", ["cuda", "cuda-int8"])
def test_a_streaming_servers_variant_is_checked_as_the_server_loads_it_from_s3(variant):
    pod = conversion(variant)["spec"]["template"]["spec"]
    steps = containers(variant)
    target = f"s3://mlinfra-registry-promo/models/mistral-7b/2026-03-01/{variant}/"
    # published before the check, so that the check reads the objects the server will read; the report last
    assert steps["publish"]["command"][-1].splitlines()[-1] == f"aws s3 sync --only-show-errors /work/out {target}"
    assert pod["containers"][0]["command"][-1].splitlines()[-1] == (
        f"aws s3 cp --only-show-errors /work/conversion.json {target}conversion.json"
    )
    check = steps["check"]
    assert f'python3 /work/engine_check.py {target} "$ENGINE" /work/check.json' in check["command"][-1]
    engine_json = json.loads(next(e["value"] for e in check["env"] if e["name"] == "ENGINE"))
    # the server's own load (its --load-format for an s3:// source) with the server's engine settings
    assert engine_json["load_format"] == "runai_streamer"
    server = job_args(variant)["server"]
    served = servers.server_args(server, target)
    assert served[served.index("--load-format") + 1] == engine_json["load_format"]
    assert jobs.SERVED not in {m["mountPath"] for m in check["volumeMounts"]}


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_job_down_scopes_its_role_before_touching_s3(variant):
    pod = conversion(variant)["spec"]["template"]["spec"]
    steps = containers(variant)
    streamed = not variant.startswith("neuron")  # the CUDA servers stream from S3: the check reads what was published
    publish = ["publish"] if streamed else []
    assert [c["name"] for c in pod["initContainers"]] == ["credentials", "fetch", "convert", *publish, "check"]
    assert {"name": "aws", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}} in pod["volumes"]
    argv = assume_role_argv(variant)
    assert argv[:5] == ["exec", "env", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "aws"]
    options = dict(zip(argv[7::2], argv[8::2], strict=True))
    assert argv[5:7] == ["sts", "assume-role"]
    assert options["--role-arn"] == CONVERTER_ROLE_ARN
    assert options["--role-session-name"] == f"promote-mistral-7b-2026-03-01-{variant}"
    assert options["--duration-seconds"] == "3600"
    assert json.loads(options["--policy"]) == access.session_policy(
        ARGS["bucket_arn"], KEY_ARN, "run-7", "mistral-7b", "2026-03-01", variant, job_args(variant)["calibration"]
    )
    script = steps["credentials"]["command"][-1]
    assert f"credential_process = /bin/cat {access.SESSION_FILE}" in script
    assert "aws sts get-caller-identity" in script  # proves the down-scoped session before any S3 call
    # A sidecar: it keeps refreshing the session beside the later steps; they start once its probe passes.
    assert steps["credentials"]["restartPolicy"] == "Always"
    assert steps["credentials"]["startupProbe"]["exec"]["command"] == ["test", "-e", "/aws/ready"]
    for name in ["fetch", "upload", *publish, *(["check"] if streamed else [])]:  # the down-scoped session only
        assert {"name": "AWS_CONFIG_FILE", "value": "/aws/config"} in steps[name]["env"]
        assert {"name": "AWS_SHARED_CREDENTIALS_FILE", "value": "/dev/null"} in steps[name]["env"]
        assert {"name": "aws", "mountPath": "/aws", "readOnly": True} in steps[name]["volumeMounts"]
        script = steps[name]["command"][-1]
        assert script.startswith(
            "set -eu\nunset AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE\n"
            "if [ -e /aws/failed ]; then cat /aws/failed >&2; exit 1; fi\n"
        )
    for name in ["convert", *([] if streamed else ["check"])]:
        step = steps[name]
        assert "aws" not in {m["name"] for m in step["volumeMounts"]}
        assert "unset AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE" in step["command"][-1]


@pytest.mark.parametrize("variant", VARIANTS)
def test_pod_identity_injects_credentials_into_the_credentials_sidecar_only(variant):
    template = conversion(variant)["spec"]["template"]
    # The EKS Pod Identity webhook reads the pod's annotation (not the Job's): comma-separated container names.
    skipped = set(template["metadata"]["annotations"]["eks.amazonaws.com/skip-containers"].split(","))
    names = [c["name"] for c in template["spec"]["initContainers"] + template["spec"]["containers"]]
    assert {"fetch", "convert", "check", "upload"} <= skipped <= set(names)  # containers that exist
    # Only the credentials sidecar keeps the pod's own credentials (it assumes the down-scoped session with them).
    assert set(names) - skipped == {"credentials"}


@pytest.mark.parametrize("variant", VARIANTS)
def test_node_loss_is_retried_and_a_conversion_error_fails_the_job(variant):
    job = conversion(variant)
    spec = job["spec"]
    assert spec["backoffLimit"] == 2
    assert spec["template"]["spec"]["restartPolicy"] == "Never"  # podFailurePolicy requires it
    assert spec["podFailurePolicy"] == {
        "rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            {"action": "FailJob", "onExitCodes": {"containerName": "convert", "operator": "NotIn", "values": [0]}},
            {"action": "FailJob", "onExitCodes": {"containerName": "check", "operator": "NotIn", "values": [0]}},
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
    pod = conversion("neuron")["spec"]["template"]["spec"]
    steps = {c["name"]: c for c in pod["initContainers"]}
    on_devices = {
        "requests": {"cpu": "4", "memory": "35Gi", "ephemeral-storage": "44Gi", "aws.amazon.com/neuron": "1"},
        "limits": {"memory": "35Gi", "aws.amazon.com/neuron": "1"},
    }
    assert steps["convert"]["resources"] == steps["check"]["resources"] == on_devices  # Neuron compiles on devices
    assert {"name": "work", "emptyDir": {"sizeLimit": "44Gi"}} in pod["volumes"]
    # The pod's request is its largest init step's: convert and check ask for more than every other step.
    others = [c for c in pod["initContainers"] + pod["containers"] if c["name"] not in ("convert", "check")]
    assert {c["resources"]["requests"]["memory"] for c in others} <= {"256Mi", "1Gi"}
    assert {c["resources"]["requests"]["cpu"] for c in others} <= {"100m", "1"}


def test_long_names_stay_dns_labels_and_distinct():
    a = jobs.job_name("a" * 32, "v" * 40 + "1", "neuron")
    b = jobs.job_name("a" * 32, "v" * 40 + "2", "neuron")
    assert len(a) <= 63 and a != b and a[-1].isalnum()


def test_job_status_conditions():
    assert job_state({"status": {"active": 1}}).state == "running"
    assert job_state({"status": {}}).state == "pending"
    assert job_state({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}).state == "succeeded"
    failed = job_state({"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]}})
    assert (failed.state, failed.detail) == ("failed", "DeadlineExceeded")


def test_neuron_compiles_and_checks_for_the_servers_exact_engine_shape():
    """The compile settings are the server's (one source, engine.py): batch, length and tensor parallelism."""
    pod = conversion("neuron")["spec"]["template"]["spec"]
    steps = {c["name"]: c for c in pod["initContainers"]}
    server = SERVERS["neuron"]
    served = engine.engine_settings(server).keywords()
    assert served == {
        "tensor_parallel_size": 2,
        "max_num_seqs": 4,
        "max_model_len": 8192,
        "dtype": "bfloat16",
        # the vllm-neuron plugin's: its NeuronConfig overrides, contiguous KV (no prefix caching), one block a sequence
        "additional_config": {"override_neuron_config": {"save_sharded_checkpoint": True}},
        "enable_prefix_caching": False,
        "num_gpu_blocks_override": 4,
    }
    for name in ("convert", "check"):
        env = {e["name"]: e.get("value") for e in steps[name]["env"]}
        assert json.loads(env["ENGINE"]) == served
        assert steps[name]["image"] == server.image  # built and checked in the server's own image
    assert "optimum-cli" not in steps["convert"]["command"][-1]
    assert "NEURON_COMPILED_ARTIFACTS=/work/out/neuron-compiled" in steps["convert"]["command"][-1]
    check_env = {e["name"]: e.get("value") for e in steps["check"]["env"]}
    assert check_env["NEURON_COMPILED_ARTIFACTS"] == "/served/neuron-compiled"
    # The check loads the artefact read-only, as the server mounts it: a load that compiles again fails.
    assert {"name": "work", "mountPath": "/served", "subPath": "out", "readOnly": True} in steps["check"][
        "volumeMounts"
    ]
    two_devices = conversion("neuron", server=SERVERS["neuron"].model_copy(update={"accelerators_per_replica": 2}))
    check = next(c for c in two_devices["spec"]["template"]["spec"]["initContainers"] if c["name"] == "check")
    assert check["resources"]["requests"]["aws.amazon.com/neuron"] == "2"


def test_the_cuda_resave_needs_no_gpu_and_the_check_does():
    steps = {c["name"]: c for c in conversion("cuda")["spec"]["template"]["spec"]["initContainers"]}
    assert "nvidia.com/gpu" not in steps["convert"]["resources"]["requests"]
    assert steps["convert"]["command"][-1].count("CUDA_VISIBLE_DEVICES= ") == 1
    assert steps["check"]["resources"]["requests"]["nvidia.com/gpu"] == "1"


def test_there_is_no_variant_without_a_server():
    assert VARIANTS == ("neuron", "neuron-int8", "cuda", "cuda-fp8", "cuda-int8", "cuda-int4")


@pytest.mark.parametrize(("variant", "scheme"), [("cuda-fp8", "fp8"), ("cuda-int8", "int8"), ("cuda-int4", "int4")])
def test_a_quantised_cuda_variant_is_built_by_llm_compressor_in_the_converter_image(variant, scheme):
    """compress.py (with quantize.py's checkpoint check and evaluate.py's reader beside it) run by the converter
    image's own python on the pool's GPU; the check loads the artefact in the server's image, as it serves."""
    from infra.ops.promotion import compress, evaluate, quantize

    steps = {c["name"]: c for c in conversion(variant)["spec"]["template"]["spec"]["initContainers"]}
    script = steps["convert"]["command"][-1]
    for module in (compress, quantize, evaluate):
        name = Path(module.__file__).name
        assert f"cat > /work/{name} <<'PY'\n{Path(module.__file__).read_text(encoding='utf-8')}PY\n" in script
    data = " --calibration /work/calibration" if facts(variant).calibrated else ""
    assert script.endswith(
        f"/opt/converter/bin/python3 /work/compress.py --scheme {scheme} --checkpoint /work/checkpoint{data} "
        "--out /work/out\n"
    )
    assert steps["convert"]["image"] == CONVERTER and steps["check"]["image"] == SERVERS[variant].image
    assert steps["convert"]["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert steps["check"]["resources"]["requests"]["nvidia.com/gpu"] == "1"
    # the check starts the engine as the server does: compressed-tensors, the variant's dtype
    assert json.loads(next(e["value"] for e in steps["check"]["env"] if e["name"] == "ENGINE"))["quantization"] == (
        "compressed-tensors"
    )


def test_a_converter_variant_without_the_converter_image_is_not_built():
    with pytest.raises(ValueError, match="cuda-int4: built in the converter image, and none was given"):
        conversion("cuda-int4", converter_image=None)
    assert containers("cuda")["convert"]["image"] == SERVERS["cuda"].image  # the bf16 re-save: the server's


def test_neuron_int8_quantizes_with_nxd_inference_then_compiles_and_checks_as_the_server_loads():
    """NxD Inference writes its quantized checkpoint into the artefact (neuron_quantize.py, shipped), then vLLM-Neuron
    compiles; each step's engine is the server's with the checkpoint's path where that step sees the artefact."""
    from infra.serving import manifests

    pod = conversion("neuron-int8")["spec"]["template"]["spec"]
    steps = {c["name"]: c for c in pod["initContainers"]}
    server = SERVERS["neuron-int8"]
    served = engine.engine_settings(server).keywords()
    assert engine.neuron_config(served) == {
        "save_sharded_checkpoint": True,
        "quantized": True,
        "quantization_type": "per_channel_symmetric",
        "quantization_dtype": "int8",
        "modules_to_not_convert": ["lm_head"],
        "quantized_checkpoints_path": "/models/neuron-quantized",
    }
    for name, seen_at in (("convert", "/work/out"), ("check", "/served")):
        env = {e["name"]: e.get("value") for e in steps[name]["env"]}
        keywords = json.loads(env["ENGINE"])
        overrides = keywords["additional_config"]["override_neuron_config"]
        assert overrides.pop("quantized_checkpoints_path") == f"{seen_at}/neuron-quantized"
        expected = engine.neuron_config(served) or {}
        expected.pop("quantized_checkpoints_path")
        assert keywords == {**served, "additional_config": {"override_neuron_config": expected}}
    # The server's own command line names the path where it mounts the artefact, and the compiled model there.
    deployment = manifests.deployment(server, "models", manifests.Registry("b", "us-east-1", "s3"))
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert json.loads(args[args.index("--additional-config") + 1]) == served["additional_config"]
    assert {"name": "NEURON_COMPILED_ARTIFACTS", "value": "/models/neuron-compiled"} in container["env"]
    check_env = {e["name"]: e.get("value") for e in steps["check"]["env"]}
    assert check_env["NEURON_COMPILED_ARTIFACTS"] == "/served/neuron-compiled"
    script = steps["convert"]["command"][-1]
    program = (Path(jobs.__file__).parent / "neuron_quantize.py").read_text(encoding="utf-8")
    assert f"cat > /work/neuron_quantize.py <<'PY'\n{program}PY\n" in script  # the file as it is in mlinfra
    assert script.endswith(
        "find /work/checkpoint -maxdepth 1 -type f ! -name '*.safetensors' ! -name '*.bin' ! -name '*.pt' "
        "! -name '*.pth' -exec cp {} /work/out/ \\;\n"
        'python3 /work/neuron_quantize.py /work/checkpoint "$ENGINE"\n'
        'NEURON_COMPILED_ARTIFACTS=/work/out/neuron-compiled python3 /work/engine_check.py /work/checkpoint "$ENGINE" '
        "/work/compile.json\n"
    )
    assert steps["convert"]["resources"]["requests"]["aws.amazon.com/neuron"] == "1"  # neuronx-cc compiles there


def test_the_neuron_int8_manifest_records_the_servers_engine():
    facts = jobs.manifest_facts(RECIPES["neuron-int8"], SERVERS["neuron-int8"])
    assert facts["precision"] == "w8a16" and facts["hardware"]["accelerator"] == "inf2"
    assert engine.neuron_config(facts["engine"])["quantized_checkpoints_path"] == "/models/neuron-quantized"
    assert "neuron-quantized/" in facts["format"] and "neuron-compiled/" in facts["format"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_steps_are_valid_shell(variant, tmp_path):
    import subprocess

    steps = {c["name"]: c for c in conversion(variant)["spec"]["template"]["spec"]["initContainers"]}
    for name in ("convert", "check"):
        script = tmp_path / f"{name}.sh"
        script.write_text(steps[name]["command"][-1], encoding="utf-8")
        done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def test_every_image_of_the_job_comes_through_the_serving_stacks_mirror():
    from infra.serving.aws.mirror import Mirror

    host = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
    pod = conversion("cuda", mirror=Mirror(host, ("ecr-public", "docker-hub")))["spec"]["template"]["spec"]
    images = {c["name"]: c["image"] for c in pod["initContainers"] + pod["containers"]}
    assert images["check"] == f"{host}/docker-hub/vllm/vllm-openai:v0.33.0"
    assert images["fetch"] == f"{host}/ecr-public/aws-cli/aws-cli:2.27.0"
    assert all(image.startswith(host) for image in images.values())


def test_cuda_int4_fetches_its_calibration_data_for_llm_compressor():
    """The AWQ recipe: `fetch` copies the calibration prefix too (and the session policy reads it, nothing more
    of datasets/), which `convert` gives compress.py."""
    job = conversion("cuda-int4")
    steps = {c["name"]: c for c in job["spec"]["template"]["spec"]["initContainers"]}
    assert steps["fetch"]["command"][-1].splitlines()[-2:] == [
        "aws s3 sync --only-show-errors s3://mlinfra-registry-promo/checkpoints/run-7/step-1000/ /work/checkpoint",
        "aws s3 sync --only-show-errors s3://mlinfra-registry-promo/datasets/calibration/chat-512/ /work/calibration",
    ]
    assert job["metadata"]["annotations"]["mlinfra.io/calibration-data"] == (
        "s3://mlinfra-registry-promo/datasets/calibration/chat-512/"
    )
    assert steps["convert"]["resources"] == {
        "requests": {"cpu": "4", "memory": "35Gi", "ephemeral-storage": "44Gi", "nvidia.com/gpu": "1"},
        "limits": {"memory": "35Gi", "nvidia.com/gpu": "1"},
    }
    argv = assume_role_argv("cuda-int4")
    policy = json.loads(dict(zip(argv[7::2], argv[8::2], strict=True))["--policy"])
    reads = {statement["Sid"]: statement for statement in policy["Statement"]}
    bucket = ARGS["bucket_arn"]
    assert reads["RegistryRead"]["Resource"] == [f"{bucket}/checkpoints/run-7/*", f"{bucket}/{CALIBRATION}*"]
    assert reads["RegistryListRead"]["Condition"] == {
        "StringLike": {"s3:prefix": ["checkpoints/run-7/*", f"{CALIBRATION}*"]}
    }
    # a variant that reads no calibration data (FP8_DYNAMIC) gets none, and its policy reads no datasets/
    fp8 = conversion("cuda-fp8")
    fp8_argv = assume_role_argv("cuda-fp8")
    assert "datasets/" not in dict(zip(fp8_argv[7::2], fp8_argv[8::2], strict=True))["--policy"]
    assert "datasets/" not in containers("cuda-fp8")["fetch"]["command"][-1]
    assert "mlinfra.io/calibration-data" not in fp8["metadata"]["annotations"]


def test_the_calibration_data_goes_to_calibrated_variants_only():
    with pytest.raises(ValueError, match="cuda-int4: calibration data None, but calibrated is True"):
        conversion("cuda-int4", calibration=None)
    with pytest.raises(ValueError, match="cuda-fp8: calibration data 'datasets/calibration/chat-512/'"):
        conversion("cuda-fp8", calibration=CALIBRATION)


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_steps_that_run_an_engine_get_the_servers_dev_shm(variant):
    """vLLM's shared-memory broadcast and NCCL's SHM transport between tensor-parallel workers outgrow the runtime's
    64 MiB /dev/shm: the conversion and its load check mount the servers' in-memory one."""
    server = SERVERS[variant]
    served = manifests.deployment(server, "models", manifests.Registry("b", "us-east-1", "s3"))["spec"]["template"]
    pod = conversion(variant)["spec"]["template"]["spec"]
    [shm] = [v for v in served["spec"]["volumes"] if v["name"] == "shm"]
    assert shm in pod["volumes"] and shm["emptyDir"]["medium"] == "Memory"
    for step in ("convert", "check"):
        assert {"name": "shm", "mountPath": "/dev/shm"} in containers(variant)[step]["volumeMounts"]
