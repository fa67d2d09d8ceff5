"""Model server profiles: how each accelerator's server is started, probed and measured (pure).

Both pools run vLLM's OpenAI-compatible server: the CUDA build on g5, the Neuron build (the AWS Neuron
deep learning container) on inf2. Both export the same engine metrics, which the autoscaler reads.
"""
from __future__ import annotations

from dataclasses import dataclass

from infra.config.serving import ModelSpec

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
}


def tensor_parallel_size(model: ModelSpec) -> int:
    """vLLM shards over GPUs on g5 and over NeuronCores on inf2 (2 per Inferentia2 device)."""
    return model.accelerators_per_replica * (2 if model.accelerator == "inf2" else 1)


def server_args(model: ModelSpec, source: str) -> list[str]:
    """Arguments of `python3 -m vllm.entrypoints.openai.api_server`; `source` is an s3:// URI or a path."""
    args = ["--model", source, "--served-model-name", model.name, "--port", str(PORT),
            "--tensor-parallel-size", str(tensor_parallel_size(model)), "--max-model-len", str(model.max_model_len)]
    if model.accelerator == "g5":
        # Stream safetensors from S3 straight to GPU memory: no disk copy on cold start.
        args += ["--load-format", "runai_streamer"]
    else:
        args += ["--device", "neuron"]
    return args


def fetch_command(source: str) -> list[str]:
    return ["aws", "s3", "sync", "--only-show-errors", source, MODEL_DIR]
