"""Model server profiles: how each accelerator's server is started, probed and measured (pure).

Both pools run vLLM's OpenAI-compatible server: the CUDA build on g5, the Neuron build (the AWS Neuron
deep learning container) on inf2. Both export the same engine metrics, which the autoscaler reads.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from infra.serving import engine
from infra.serving.families import FAMILIES
from infra.serving.spec import ModelSpec

PORT = 8000
MODEL_DIR = engine.MODEL_DIR
QUEUE_METRIC = "vllm:num_requests_waiting"  # requests queued, not yet running
RUNNING_METRIC = "vllm:num_requests_running"  # sequences in the running batch
# Requests the endpoint picker holds in its flow-control queue (GIE v1.5.0, pkg/epp/metrics/metrics.go: a gauge
# labelled fairness_id, priority, inference_pool, model_name, target_model_name): the demand of a model at zero.
HELD_METRIC = "inference_extension_flow_control_queue_size"
# KV-cache blocks in use, 0-1: vLLM renamed gpu_cache_usage_perc to kv_cache_usage_perc (v0.10); queries
# read both so a server image bump does not blind the autoscaler.
KV_CACHE_METRICS = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
# Pinned image of the init container that copies Neuron artefacts from the registry onto the node.
AWS_CLI_IMAGE = "public.ecr.aws/aws-cli/aws-cli:2.27.0"
# An in-memory /dev/shm for every pod that runs an engine (servers, and the promotion Jobs' conversion, load check
# and evaluation): vLLM's shared-memory broadcast queue and NCCL's SHM transport between tensor-parallel workers
# outgrow the container runtime's 64 MiB default. Its pages count against the pod's memory as they are used.
SHM_SIZE = "8Gi"
STREAMER_LOAD_FORMAT = "runai_streamer"


def shm_volume() -> dict[str, Any]:
    """The in-memory /dev/shm volume, a new dict per pod."""
    return {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE}}


def shm_mount() -> dict[str, Any]:
    """A container's mount of shm_volume at /dev/shm, a new dict per container."""
    return {"name": "shm", "mountPath": "/dev/shm"}


# The Neuron helm chart's scheduler (kube-scheduler + Neuron extension), for topology-aware device allocation.
NEURON_SCHEDULER = "my-scheduler"


@dataclass(frozen=True)
class StartupBudget:
    """How long a replica may take to serve, from nothing (estimates on the safe side, not measurements)."""

    node_seconds: int  # a node from zero: launch, join, device plugin ready
    pull_seconds: int  # the server image (8-20 GB for vLLM and the Neuron DLC) on a fresh node
    load_seconds: int  # weights (and Neuron graphs) onto the devices until /health answers

    @property
    def rollout_seconds(self) -> int:
        """What Pulumi waits for a Deployment to become ready (its default, 10 minutes, is shorter)."""
        return self.node_seconds + self.pull_seconds + self.load_seconds


@dataclass(frozen=True)
class ServerProfile:
    accelerator: str
    resource: str  # extended resource requested per replica
    scheduler_name: str | None
    fetch_to_disk: bool  # copy the artefact before start (Neuron) or stream it from S3 (CUDA)
    startup: StartupBudget


# Every GPU pool (g4dn, g5, g6, g6e on EKS; l4, a100 on GKE) runs the same vLLM CUDA server.
PROFILES = {
    name: (
        ServerProfile(name, f.resource, NEURON_SCHEDULER, True, StartupBudget(300, 900, 1200))
        if f.neuron
        else ServerProfile(name, f.resource, None, False, StartupBudget(300, 600, 900))
    )
    for name, f in FAMILIES.items()
}
READINESS_PERIOD_SECONDS = 10  # the servers' readiness probe: how often a started server is asked whether it serves
# Seconds for the Service to stop sending a terminating pod new requests (endpoint removal propagating
# to kube-proxy) before the server is told to stop.
ENDPOINT_DRAIN_SECONDS = 15


def termination_grace_seconds(model: ModelSpec) -> int:
    """Long enough for the longest request in flight to finish after new ones stop arriving."""
    return ENDPOINT_DRAIN_SECONDS + model.max_request_seconds + 15


def server_command(model: ModelSpec) -> list[str]:
    """How the server starts: `vllm serve`, the CUDA image's own entrypoint (vLLM 0.33.0's docker/Dockerfile; the
    `python3 -m vllm.entrypoints.openai.api_server` module it replaces warns that it is deprecated and may be
    removed), and on the Neuron DLC's PATH (vLLM 0.16.0 with the vllm-neuron plugin, as AWS's own examples start
    it; the image's entrypoint wrapper only runs its arguments, and a command replaces it)."""
    return ["vllm", "serve"]


def streamed_load(source: str) -> dict[str, str]:
    """The engine keyword that loads `source`: an s3:// URI streams its safetensors straight to device memory with
    the Run:ai Model Streamer (no disk copy on cold start; vLLM pulls the config and tokenizer files with it too),
    a path loads as vLLM's default does. The server's flag and the promotion Job's load check both read it."""
    return {"load_format": STREAMER_LOAD_FORMAT} if source.startswith("s3://") else {}


def server_args(model: ModelSpec, source: str) -> list[str]:
    """Arguments of the server_command; `source` is an s3:// URI or a path."""
    args = ["--model", source, "--served-model-name", model.name, "--port", str(PORT)]
    return args + engine.engine_settings(model).flags() + engine.as_flags(streamed_load(source))


def drain_command() -> list[str]:
    """preStop: wait for the endpoint removal to reach every proxy, then until the server has no request
    running or waiting (its own metrics), so SIGTERM never cuts a generation. The grace period bounds it."""
    program = (
        "import re, time, urllib.request\n"
        f"time.sleep({ENDPOINT_DRAIN_SECONDS})\n"
        "pattern = re.compile(r'^vllm:num_requests_(?:running|waiting)(?:\\{.*\\})? ([0-9.e+-]+)$', re.M)\n"
        "while True:\n"
        "    try:\n"
        f"        text = urllib.request.urlopen('http://127.0.0.1:{PORT}/metrics', timeout=5).read().decode()\n"
        "    except OSError:\n"
        "        break\n"
        "    if sum(float(v) for v in pattern.findall(text)) == 0:\n"
        "        break\n"
        "    time.sleep(2)\n"
    )
    return ["python3", "-c", program]


MARKED_FAILED = "marked _FAILED"
UNFINISHED = "no manifest.json (promotion failed or unfinished)"


def _refuse(source: str, why: str) -> str:
    """The shell that ends a check: the reason on stderr, exit 1."""
    return f'echo "refusing {source}: {why}" >&2; exit 1'


def check_script(source: str) -> str:
    """Shell refusing (exit 1) an artefact prefix (s3://bucket/models/<name>/<version>/<variant>/) that has a
    _FAILED marker or no manifest.json: promote writes the manifest only for a finished, checked artefact and
    marks every variant of a failed version. One listing; builtins only."""
    bucket, _, prefix = source.removeprefix("s3://").partition("/")
    return (
        f'keys="$(aws s3api list-objects-v2 --bucket {shlex.quote(bucket)} --prefix {shlex.quote(prefix)} '
        "--query 'Contents[].Key' --output text)\"\nmanifest=\n"
        f'for key in $keys; do case "$key" in\n'
        f"  {shlex.quote(prefix + '_FAILED')}) {_refuse(source, MARKED_FAILED)};;\n"
        f"  {shlex.quote(prefix + 'manifest.json')}) manifest=1;;\n"
        "esac; done\n"
        f'[ -n "$manifest" ] || {{ {_refuse(source, UNFINISHED)}; }}\n'
    )


def mounted_check_command(source: str) -> list[str]:
    """The same refusal as check_script, for an artefact mounted at MODEL_DIR (`source` names it in messages)."""
    return [
        "/bin/sh",
        "-c",
        "set -euf\n"
        f"if [ -e {MODEL_DIR}/_FAILED ]; then {_refuse(source, MARKED_FAILED)}; fi\n"
        f"[ -f {MODEL_DIR}/manifest.json ] || {{ {_refuse(source, UNFINISHED)}; }}\n",
    ]


def check_command(source: str) -> list[str]:
    return ["/bin/sh", "-c", "set -euf\n" + check_script(source)]


# The engine settings compiled into a Neuron artefact: vLLM-Neuron builds the model from the artefact's own config,
# so a server whose settings differ starts and then fails on the first request the artefact was not compiled for.
COMPILED_SHAPE = ("tensor_parallel_size", "max_num_seqs", "max_model_len", "dtype")


def compiled_shape(keywords: dict[str, object]) -> dict[str, object]:
    """The compiled part of an engine's keywords (engine.EngineSettings.keywords()), in COMPILED_SHAPE's order."""
    return {key: keywords[key] for key in COMPILED_SHAPE if key in keywords}


def shape_text(shape: dict[str, object]) -> str:
    return ", ".join(f"{key}={value}" for key, value in shape.items())


def shape_check_script(source: str, shape: dict[str, object]) -> str:
    """Shell refusing (exit 1) an artefact whose manifest records another compiled shape than `shape` (the
    server's), both named; read from the manifest before the artefact is copied (jq, in the aws-cli image)."""
    picked = "{" + ", ".join(COMPILED_SHAPE) + "}"
    names = ", ".join(f'"{key}"' for key in COMPILED_SHAPE)
    want = json.dumps(shape, sort_keys=True, separators=(",", ":"))
    manifest = f"{MODEL_DIR}/manifest.json"
    return (
        f"aws s3 cp --only-show-errors {shlex.quote(source + 'manifest.json')} {manifest}\n"
        f"if [ \"$(jq -cS '.engine | {picked}' {manifest})\" != {shlex.quote(want)} ]; then\n"
        f'  shown="$(jq -r \'.engine as $e | [{names} | "\\(.)=\\($e[.])"] | join(", ")\' {manifest})"\n'
        f'  echo "refusing {source}: compiled for $shown; this server runs {shape_text(shape)} (the compiled shape: '
        'promote a version for this one)" >&2; exit 1\n'
        "fi\n"
    )


def fetch_command(source: str, shape: dict[str, object] | None = None) -> list[str]:
    """The Neuron server's init step: refuse a failed, unfinished or (with `shape`) differently compiled artefact,
    then copy it to MODEL_DIR."""
    return [
        "/bin/sh",
        "-c",
        "set -euf\n"
        + check_script(source)
        + (shape_check_script(source, shape) if shape is not None else "")
        + f"exec aws s3 sync --only-show-errors {shlex.quote(source)} {MODEL_DIR}\n",
    ]
