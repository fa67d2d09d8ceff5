"""The evaluation Jobs of the quality gate: valid Kubernetes objects, on the variant's serving pool as its server,
in its image, reading reference, variant and data read-only and writing the one quality.json the gate reads."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest

from infra.ops.promotion import evaluation, quality
from infra.registry import layout as registry_layout
from infra.serving import engine, manifests
from infra.serving.aws import converter_access as access
from infra.serving.spec import ModelSpec
from tests.infra.ops.promotion.standins import CONVERTER_ROLE_ARN, KEY_ARN, credential_process_argv
from tests.infra.ops.promotion.test_access import LONGEST, statements
from tests.k8s_schemas import validate

BUCKET = "mlinfra-registry-promo"
BUCKET_ARN = f"arn:aws:s3:::{BUCKET}"
EVALS = "datasets/evals/facts/"
CHECKPOINT = "checkpoints/run-7/step-1000/"
ARGS = dict(
    bucket=BUCKET,
    bucket_arn=BUCKET_ARN,
    key_arn=KEY_ARN,
    role_arn=CONVERTER_ROLE_ARN,
    region="us-east-1",
    ns="models",
    checkpoint=CHECKPOINT,
    checkpoint_bytes=15 << 30,
    evaluation=EVALS,
    model="mistral-7b",
    version="2026-03-01",
    run_id="run-7",
)
SERVERS = {
    "cuda-int4": ModelSpec.model_validate(
        {
            "name": "mistral-7b",
            "version": "2026-03-01",
            "accelerator": "g5",
            "image": "vllm/vllm-openai:v0.33.0",
            "variant": "cuda-int4",
            "cpu": 6,
            "memoryGib": 40,
        }
    ),
    "neuron-int8": ModelSpec.model_validate(
        {
            "name": "mistral-7b",
            "version": "2026-03-01",
            "accelerator": "inf2",
            "image": "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.16.0-neuronx-py312-sdk2.31.1-ubuntu24.04",
            "variant": "neuron-int8",
        }
    ),
}


CONVERTER = "123456789012.dkr.ecr.us-east-1.amazonaws.com/mlinfra-converter:0.33.0-llmc0.14.0.1"


def job(variant: str = "cuda-int4", **changes) -> dict:
    args = {**ARGS, "variant": variant, "server": SERVERS[variant], "converter_image": CONVERTER}
    return evaluation.evaluation_job(**{**args, **changes})


def steps(variant: str = "cuda-int4") -> dict[str, dict]:
    pod = job(variant)["spec"]["template"]["spec"]
    return {c["name"]: c for c in pod["initContainers"] + pod["containers"]}


@pytest.mark.parametrize("variant", SERVERS)
def test_the_job_validates_against_the_kubernetes_schema(variant):
    validate(job(variant))


@pytest.mark.parametrize("variant", SERVERS)
def test_the_job_runs_on_the_variants_serving_pool_as_its_server(variant):
    server = SERVERS[variant]
    served = manifests.deployment(server, "models", manifests.Registry(BUCKET, "us-east-1", "s3"))["spec"]["template"]
    pod = job(variant)["spec"]["template"]["spec"]
    for key in ("nodeSelector", "tolerations"):
        assert pod[key] == served["spec"][key]
    assert pod.get("schedulerName") == served["spec"].get("schedulerName")
    evaluate = steps(variant)["evaluate"]
    [server_container] = served["spec"]["containers"]
    assert server_container["image"] == server.image
    # A variant llm-compressor built is evaluated where lm-eval is: the converter image; the others in the server's.
    assert evaluate["image"] == (CONVERTER if variant == "cuda-int4" else server.image)
    # The server's CPU and devices; memory for one model of the checkpoint's size (evaluate.py frees the reference
    # before it loads the variant) and the work volume as ephemeral storage, both from the checkpoint.
    requests = dict(evaluate["resources"]["requests"])
    assert requests.pop("ephemeral-storage") == "25Gi"  # one model: the 15 GiB checkpoint (or a variant) + 10
    served_requests = dict(server_container["resources"]["requests"])
    served_requests.pop("ephemeral-storage", None)  # a Neuron server's artefact copy; the Job has its work volume
    assert requests == {**served_requests, "memory": "23Gi"}  # 15 GiB + 8
    assert evaluate["resources"]["limits"] == {**server_container["resources"]["limits"], "memory": "23Gi"}
    assert pod["serviceAccountName"] == "model-converter" and pod["restartPolicy"] == "Never"


def test_the_cuda_int4_job_asks_for_the_servers_cpu_and_gpu_and_memory_for_one_model():
    requests = steps()["evaluate"]["resources"]["requests"]
    assert requests == {"cpu": "6", "memory": "23Gi", "ephemeral-storage": "25Gi", "nvidia.com/gpu": "1"}
    pod = job()["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"mlinfra.io/accelerator": "g5"}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


@pytest.mark.parametrize(("gib", "memory"), [(1, 9), (15, 23), (140, 148)])
def test_the_step_holds_one_model_whatever_the_servers_memory(gib, memory):
    """The server's memoryGib is what serving needs (weights on the devices); the evaluation reads one model
    through host memory (and on inf2 runs it there), so it asks for the checkpoint's size plus 8 GiB, never the
    server's figure: a 10 GiB default spec would be OOM-killed by an 8B model."""
    for server in SERVERS.values():
        assert evaluation.memory_gib(gib << 30) == memory
        assert evaluation.resources(server, gib << 30).memory_gib == memory
    assert evaluation.device_gib(SERVERS["cuda-int4"], 15 << 30) == 17.0  # the model on one GPU, + 2 GiB
    assert evaluation.device_gib(SERVERS["neuron-int8"], 15 << 30) is None  # the host CPU evaluates
    requests = steps("neuron-int8")["evaluate"]["resources"]["requests"]
    assert requests == {"cpu": "2", "memory": "23Gi", "ephemeral-storage": "25Gi", "aws.amazon.com/neuron": "1"}


def test_every_step_that_runs_an_engine_gets_the_servers_dev_shm():
    pod = job()["spec"]["template"]["spec"]
    assert {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}} in pod["volumes"]
    assert {"name": "shm", "mountPath": "/dev/shm"} in steps()["evaluate"]["volumeMounts"]


def reference_job(variant: str = "cuda-int4", **changes) -> dict:
    args = {**ARGS, "variant": variant, "server": SERVERS[variant], "converter_image": CONVERTER}
    return evaluation.reference_job(**{**args, **changes})


def figures_prefix(variant: str = "cuda-int4") -> str:
    image = CONVERTER if variant == "cuda-int4" else SERVERS[variant].image
    return evaluation.reference_prefix("mistral-7b", "2026-03-01", evaluation.place(SERVERS[variant], image))


def test_it_fetches_the_variant_data_and_reference_figures_and_uploads_one_object():
    s = steps()
    assert [c["name"] for c in job()["spec"]["template"]["spec"]["initContainers"]] == [
        "credentials",
        "fetch",
        "evaluate",
    ]
    assert s["fetch"]["command"][-1].splitlines()[-3:] == [
        f"aws s3 sync --only-show-errors s3://{BUCKET}/models/mistral-7b/2026-03-01/cuda-int4/ /work/model",
        f"aws s3 sync --only-show-errors s3://{BUCKET}/{EVALS} /work/data",
        f"aws s3 sync --only-show-errors s3://{BUCKET}/{figures_prefix()} /work/reference",
    ]
    assert s["upload"]["command"][-1].splitlines()[-1] == (
        f"aws s3 cp --only-show-errors /out/quality.json s3://{BUCKET}/models/mistral-7b/2026-03-01/cuda-int4/"
        "quality.json"
    )
    # where gate.py reads it
    assert evaluation.quality_key("mistral-7b", "2026-03-01", "cuda-int4") == (
        registry_layout.model_prefix("mistral-7b", "2026-03-01", "cuda-int4") + quality.QUALITY_FILE
    )
    assert access.QUALITY_FILE == quality.QUALITY_FILE


@pytest.mark.parametrize("variant", SERVERS)
def test_the_reference_is_measured_once_per_place_and_kept_with_the_version(variant):
    pod = reference_job(variant)["spec"]["template"]["spec"]
    fetch, upload = pod["initContainers"][1], pod["containers"][0]
    assert fetch["command"][-1].splitlines()[-2:] == [
        f"aws s3 sync --only-show-errors s3://{BUCKET}/{CHECKPOINT} /work/model",
        f"aws s3 sync --only-show-errors s3://{BUCKET}/{EVALS} /work/data",
    ]
    kept = ["figures.json"] + (["tasks.json"] if variant == "cuda-int4" else [])  # lm-eval's scores where it runs
    assert upload["command"][-1].splitlines()[-len(kept) :] == [
        f"aws s3 cp --only-show-errors /out/{name} s3://{BUCKET}/{figures_prefix(variant)}{name}" for name in kept
    ]
    assert figures_prefix(variant).startswith("models/mistral-7b/2026-03-01/reference/")
    assert (
        pod["initContainers"][2]["command"][-1]
        .splitlines()[-1]
        .endswith("/out/evaluate.py --reference /in/model --data /in/data --save-reference /out/figures.json")
    )
    # the place: the pool and the image, so variants evaluated elsewhere get a reference measured there
    assert evaluation.place(SERVERS[variant], "a:1") != evaluation.place(SERVERS[variant], "a:2")
    validate(reference_job(variant))


def serving_flags(variant: str = "cuda-int4", reference: bool = False) -> list[str]:
    served = (
        SERVERS[variant].model_copy(update={"variant": "cuda", "precision": None}) if reference else SERVERS[variant]
    )
    return engine.engine_settings(served).flags()


def test_lm_eval_scores_the_model_as_the_images_vllm_serves_it():
    """The variant's tasks are scored against the Job's own vLLM with its server's engine flags (its quantization
    too); the reference's against the same engine without the variant's quantization, as a bf16 server runs it."""
    variant_flags, reference_flags = serving_flags(), serving_flags(reference=True)
    assert variant_flags[variant_flags.index("--quantization") + 1] == "compressed-tensors"
    assert "--quantization" not in reference_flags
    assert {f: v for f, v in zip(variant_flags, variant_flags[1:], strict=False) if f != "--quantization"}.keys() >= {
        "--tensor-parallel-size", "--max-num-seqs", "--max-model-len"}  # fmt: skip
    script = reference_job()["spec"]["template"]["spec"]["initContainers"][2]["command"][-1]
    assert f"--serve {shlex.quote(json.dumps(reference_flags))}" in script
    assert "--serve" not in steps("neuron-int8")["evaluate"]["command"][-1]  # no lm-eval in the Neuron image


def test_what_it_judges_is_mounted_read_only():
    s = steps()
    assert s["evaluate"]["volumeMounts"] == [
        {"name": "work", "mountPath": "/in", "readOnly": True},
        {"name": "out", "mountPath": "/out"},
        {"name": "shm", "mountPath": "/dev/shm"},  # in memory, nothing it judges
    ]
    assert {"name": "out", "mountPath": "/out", "readOnly": True} in s["upload"]["volumeMounts"]
    assert "work" not in {m["name"] for m in s["upload"]["volumeMounts"]}
    assert steps("neuron-int8")["evaluate"]["command"][-1].splitlines()[-1] == (
        "python3 /out/evaluate.py --reference-figures /in/reference/figures.json --variant /in/model --data /in/data "
        "--out /out/quality.json"
    )
    # In the converter image: lm_tasks.py scores the variant's tasks (its scratch in /tmp, not the small /out), then
    # evaluate.py records them beside the reference's, which its reference Job kept
    assert s["evaluate"]["command"][-1].splitlines()[-3:] == [
        "export HF_HOME=/tmp/hf-home",
        "/opt/converter/bin/python3 /out/lm_tasks.py --model /in/model --data /in/data --out /out/tasks.json "
        f"--work /tmp/lm-eval-tasks --serve {shlex.quote(json.dumps(serving_flags()))}",
        "/opt/converter/bin/python3 /out/evaluate.py --reference-figures /in/reference/figures.json --variant "
        "/in/model --data /in/data --out /out/quality.json --task-scores /in/reference/tasks.json /out/tasks.json",
    ]


def shipped(script: str, program: str) -> str:
    """The file a script's heredoc writes to /out/<program>."""
    return script.split(f"cat > /out/{program} <<'PY'\n", 1)[1].split("\nPY\n", 1)[0] + "\n"


@pytest.mark.parametrize("variant", SERVERS)
def test_it_ships_the_projects_programs_unchanged(tmp_path, variant):
    script = steps(variant)["evaluate"]["command"][-1]
    programs = {"evaluate.py": evaluation.EVALUATE} | (
        {"lm_tasks.py": evaluation.LM_TASKS} if variant == "cuda-int4" else {}
    )
    for name, text in programs.items():
        assert shipped(script, name) == text
    # The heredocs write them byte for byte (no line of them ends a heredoc early, no expansion: quoted delimiter).
    lines = script.replace("/out/", f"{tmp_path}/").splitlines()
    first_run = next(i for i, line in enumerate(lines) if line.startswith(("python3 ", "export ", "/opt/")))
    path = tmp_path / "evaluate.sh"
    path.write_text("\n".join(lines[:first_run]) + "\n", encoding="utf-8")
    done = subprocess.run(["sh", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for name, text in programs.items():
        assert (tmp_path / name).read_text(encoding="utf-8") == text


def test_the_session_reads_three_prefixes_and_writes_the_one_quality_object():
    argv = credential_process_argv(job())
    options = dict(zip(argv[7::2], argv[8::2], strict=True))
    assert options["--role-arn"] == CONVERTER_ROLE_ARN
    assert options["--role-session-name"] == "evaluate-mistral-7b-2026-03-01-cuda-int4"
    policy = statements(json.loads(options["--policy"]))
    variant = "models/mistral-7b/2026-03-01/cuda-int4/"
    reads = (variant, EVALS, figures_prefix())  # not the checkpoint: the reference's figures stand for it
    assert set(policy) == {"RegistryList", "RegistryRead", "RegistryWriteResults", "RegistryKey"}
    assert policy["RegistryRead"]["Resource"] == [f"{BUCKET_ARN}/{p}*" for p in reads]
    assert policy["RegistryRead"]["Action"] == registry_layout.READ_ACTIONS
    assert policy["RegistryList"]["Condition"] == {"StringLike": {"s3:prefix": [f"{p}*" for p in reads]}}
    assert policy["RegistryWriteResults"] == {
        "Sid": "RegistryWriteResults",
        "Effect": "Allow",
        "Action": ["s3:PutObject"],
        "Resource": [f"{BUCKET_ARN}/{variant}quality.json"],
    }
    assert policy["RegistryKey"]["Action"] == ["kms:Decrypt", "kms:GenerateDataKey"]
    actions = [a for s in policy.values() for a in s["Action"]]
    assert not [a for a in actions if "Delete" in a or "*" in a]
    # the reference Job reads the checkpoint and the data, and writes its figures only
    argv = credential_process_argv(reference_job())
    policy = statements(json.loads(dict(zip(argv[7::2], argv[8::2], strict=True))["--policy"]))
    assert policy["RegistryRead"]["Resource"] == [f"{BUCKET_ARN}/{p}*" for p in (CHECKPOINT, EVALS)]
    assert policy["RegistryWriteResults"]["Resource"] == [
        f"{BUCKET_ARN}/{figures_prefix()}{name}" for name in ("figures.json", "tasks.json")
    ]


def test_only_the_credentials_sidecar_gets_the_pods_own_credentials():
    template = job()["spec"]["template"]
    skipped = set(template["metadata"]["annotations"]["eks.amazonaws.com/skip-containers"].split(","))
    names = {c["name"] for c in template["spec"]["initContainers"] + template["spec"]["containers"]}
    assert names - skipped == {"credentials"} and skipped <= names
    s = steps()
    assert "aws" not in {m["name"] for m in s["evaluate"]["volumeMounts"]}
    assert (
        "unset AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"
        in s["evaluate"]["command"][-1]
    )
    for name in ("fetch", "upload"):
        assert {"name": "AWS_CONFIG_FILE", "value": "/aws/config"} in s[name]["env"]


def test_an_evaluation_error_fails_the_job_and_node_loss_is_retried():
    spec = job()["spec"]
    assert spec["podFailurePolicy"]["rules"] == [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {"action": "FailJob", "onExitCodes": {"containerName": "evaluate", "operator": "NotIn", "values": [0]}},
    ]
    assert spec["activeDeadlineSeconds"] == evaluation.DEADLINE_SECONDS and spec["backoffLimit"] == 2


def test_the_steps_are_valid_shell(tmp_path):
    for name, step in steps().items():
        path = tmp_path / f"{name}.sh"
        path.write_text(step["command"][-1], encoding="utf-8")
        done = subprocess.run(["sh", "-n", str(path)], capture_output=True, text=True)
        assert done.returncode == 0, (name, done.stderr)


def test_names_are_distinct_from_the_conversion_jobs():
    from infra.ops.promotion import jobs

    assert evaluation.job_name("mistral-7b", "v2", "cuda-int4") == "evaluate-mistral-7b-v2-cuda-int4"
    assert jobs.job_name("mistral-7b", "v2", "cuda-int4") == "convert-mistral-7b-v2-cuda-int4"
    long = evaluation.job_name("m" * 32, "v" * 63, "cuda-int4")
    assert len(long) <= 63 and long != evaluation.job_name("m" * 32, "v" * 62 + "w", "cuda-int4")


def test_the_longest_allowed_names_fit_the_session_policy_limit():
    longest = {
        **ARGS,
        "bucket_arn": LONGEST["bucket_arn"],
        "key_arn": LONGEST["key_arn"],
        "checkpoint": f"checkpoints/{LONGEST['run_id']}/step-1000000/",
        "model": LONGEST["model"],
        "version": LONGEST["version"],
        "evaluation": "datasets/evals/" + "e" * 64 + "/",
    }
    for build in (evaluation.evaluation_job, evaluation.reference_job):  # each packs its policy, or raises
        for variant in SERVERS:
            build(**longest, server=SERVERS[variant], variant=variant, converter_image=CONVERTER)


def test_the_shipped_program_runs_on_its_own(tmp_path):
    """The program as the Job writes it, run alone (no project on the path): bad data exits 2 naming file and line,
    before any model is loaded."""
    script = steps()["evaluate"]["command"][-1]
    program = tmp_path / "evaluate.py"
    program.write_text(shipped(script, "evaluate.py"), encoding="utf-8")
    data = tmp_path / "data"
    data.mkdir()
    (data / "held-out.jsonl").write_text('{"text": "the registry keeps every version"}\n', encoding="utf-8")
    (data / "tasks.jsonl").write_text('{"prompt": "code of amber is"}\n', encoding="utf-8")
    argv = ["--reference", "r", "--variant", "v", "--data", str(data), "--out", str(tmp_path / "q.json")]
    done = subprocess.run(
        [sys.executable, "-I", str(program), *argv], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == f"error: {data}/tasks.jsonl:1: needs 'prompt' and 'answer' as text"
