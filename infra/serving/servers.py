"""Model server profiles: how each accelerator's server is started, probed and measured (pure).

Both pools run vLLM's OpenAI-compatible server: the CUDA build on g5, the Neuron build (the AWS Neuron
deep learning container) on inf2. Both export the same engine metrics, which the autoscaler reads.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from infra.serving.aws.config import ModelSpec

PORT = 8000
MODEL_DIR = "/models"
QUEUE_METRIC = "vllm:num_requests_waiting"  # requests queued, not yet running
KV_CACHE_METRIC = "vllm:gpu_cache_usage_perc"  # KV-cache blocks in use, 0-1
# Pinned image of the init container that copies Neuron artefacts from the registry onto the node.
AWS_CLI_IMAGE = "public.ecr.aws/aws-cli/aws-cli:2.27.0"
# The Neuron helm chart's scheduler (kube-scheduler + Neuron extension), for topology-aware device allocation.
NEURON_SCHEDULER = "my-scheduler"


@dataclass(frozen=True)
class ServerProfile:
    accelerator: str
    resource: str  # extended resource requested per replica
    scheduler_name: str | None
    fetch_to_disk: bool  # copy the artefact before start (Neuron) or stream it from S3 (CUDA)


PROFILES = {
    "g5": ServerProfile("g5", "nvidia.com/gpu", None, fetch_to_disk=False),
    "inf2": ServerProfile("inf2", "aws.amazon.com/neuron", NEURON_SCHEDULER, fetch_to_disk=True),
    # GKE's L4 pool (GCP serving): the same vLLM CUDA server, streaming from the GCS bridge bucket.
    "l4": ServerProfile("l4", "nvidia.com/gpu", None, fetch_to_disk=False),
}


def tensor_parallel_size(model: ModelSpec) -> int:
    """vLLM shards over GPUs on g5 and over NeuronCores on inf2 (2 per Inferentia2 device)."""
    return model.accelerators_per_replica * (2 if model.accelerator == "inf2" else 1)


def server_args(model: ModelSpec, source: str) -> list[str]:
    """Arguments of `python3 -m vllm.entrypoints.openai.api_server`; `source` is an s3:// URI or a path."""
    args = [
        "--model",
        source,
        "--served-model-name",
        model.name,
        "--port",
        str(PORT),
        "--tensor-parallel-size",
        str(tensor_parallel_size(model)),
        "--max-model-len",
        str(model.max_model_len),
    ]
    if not PROFILES[model.accelerator].fetch_to_disk:
        # Stream safetensors from S3 (or GCS) straight to GPU memory: no disk copy on cold start.
        args += ["--load-format", "runai_streamer"]
    else:
        args += ["--device", "neuron"]
    return args


def check_script(source: str) -> str:
    """Shell refusing (exit 1) an artefact prefix (s3://bucket/models/<name>/<version>/<variant>/) that has a
    _FAILED marker or no manifest.json: promote writes the manifest only for a finished, checked artefact and
    marks every variant of a failed version. One listing; builtins only."""
    bucket, _, prefix = source.removeprefix("s3://").partition("/")
    return (
        f'keys="$(aws s3api list-objects-v2 --bucket {shlex.quote(bucket)} --prefix {shlex.quote(prefix)} '
        "--query 'Contents[].Key' --output text)\"\nmanifest=\n"
        f'for key in $keys; do case "$key" in\n'
        f'  {shlex.quote(prefix + "_FAILED")}) echo "refusing {source}: marked _FAILED" >&2; exit 1;;\n'
        f"  {shlex.quote(prefix + 'manifest.json')}) manifest=1;;\n"
        "esac; done\n"
        f'[ -n "$manifest" ] || {{ echo "refusing {source}: no manifest.json (promotion failed or '
        'unfinished)" >&2; exit 1; }\n'
    )


def check_command(source: str) -> list[str]:
    return ["/bin/sh", "-c", "set -euf\n" + check_script(source)]


def fetch_command(source: str) -> list[str]:
    return [
        "/bin/sh",
        "-c",
        "set -euf\n"
        + check_script(source)
        + f"exec aws s3 sync --only-show-errors {shlex.quote(source)} {MODEL_DIR}\n",
    ]
