"""Recording stand-ins for promotion's ports: an in-memory registry and a scripted cluster whose Jobs
write what the real conversion Jobs write (artefact files, then conversion.json)."""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from infra.core.project import load_project, stack_config
from infra.ops.promotion.ports import Conflict, JobState, StoredObject
from infra.serving.aws import converter_access as access
from tests.infra.ops.lifecycle.recording import StackState, World

BUCKET = "mlinfra-registry-promo"
RUN_ID = "llama-ft-007"
NOW = "2026-03-01T10:00:30Z"
CONVERTER_ROLE_ARN = "arn:aws:iam::123456789012:role/mlinfra-serving-demo-model-converter"
KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/0f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9"


def seed_run(put: Callable[[str, bytes], Any], run_id: str, marker: str = "_SUCCESS") -> None:
    for step in ("step-200", "step-1000", "step-900"):
        put(f"checkpoints/{run_id}/{step}/model.safetensors", step.encode() * 10)
    put(f"checkpoints/{run_id}/step-1000/config.json", b"{}")
    put(
        f"runs/{run_id}/{marker}",
        json.dumps(
            {"exit_code": 0 if marker == "_SUCCESS" else 3, "checkpoints_exported": True, "ended_at": NOW}
        ).encode(),
    )


class MemoryStore:
    """`ObjectStore` in memory; keeps every version of every key, records writes. The ETag of a version is its
    number and hash, so equal bodies written twice differ, as S3's do not need to (stricter). `before_write`
    runs before each conditional write (a test's concurrent writer)."""

    def __init__(self, bucket: str = BUCKET):
        self.bucket = bucket
        self.versions: dict[str, list[bytes]] = {}
        self.writes: list[str] = []
        self.refused: list[str] = []
        self.before_write: Callable[[str], None] | None = None
        self.sizes: dict[str, int] = {}  # listed sizes instead of the bodies' (a 140 GB checkpoint in a few bytes)

    def get(self, key: str) -> bytes | None:
        return self.versions[key][-1] if key in self.versions else None

    def read(self, key: str) -> tuple[bytes, str] | None:
        return (self.versions[key][-1], self._etag(key)) if key in self.versions else None

    def put(self, key: str, body: bytes) -> None:
        self.writes.append(key)
        self.versions.setdefault(key, []).append(body)

    def put_new(self, key: str, body: bytes) -> None:
        self._conditional(key)
        if key in self.versions:
            self.refused.append(key)
            raise Conflict(f"{key}: PreconditionFailed")
        self.put(key, body)

    def put_if_match(self, key: str, body: bytes, etag: str) -> None:
        self._conditional(key)
        if key not in self.versions or self._etag(key) != etag:
            self.refused.append(key)
            raise Conflict(f"{key}: PreconditionFailed")
        self.put(key, body)

    def _conditional(self, key: str) -> None:
        if self.before_write:
            self.before_write(key)

    def _etag(self, key: str) -> str:
        return f'"{len(self.versions[key])}-{hashlib.md5(self.versions[key][-1]).hexdigest()}"'

    def list(self, prefix: str) -> list[StoredObject]:
        return [
            StoredObject(k, self.sizes.get(k, len(v[-1])), NOW)
            for k, v in sorted(self.versions.items())
            if k.startswith(prefix)
        ]

    def json(self, key: str) -> Any:
        raw = self.get(key)
        return None if raw is None else json.loads(raw)


class KubectlRefused(Exception):
    pass


@dataclass
class Cluster:
    """`Jobs`: each Job runs for `polls` state checks, then ends as scripted in `outcome` (default
    succeeded). A succeeding Job uploads its artefact and report; a failing one may leave a partial file.
    Outcomes "running" (never ends) and "unschedulable" (pending, its pod unplaceable) never finish;
    `interrupt_after` raises KeyboardInterrupt at that state check (Ctrl-C while waiting). Creating a Job
    that exists is refused, as `kubectl create` refuses it (AlreadyExists)."""

    store: MemoryStore
    outcome: dict[str, str] = field(default_factory=dict)  # variant -> "succeeded" | "failed" | "bad-report" | ...
    polls: int = 2
    interrupt_after: int | None = None
    applied: list[dict[str, Any]] = field(default_factory=list)
    calls: list[tuple] = field(default_factory=list)
    existing: set[str] = field(default_factory=set)  # Jobs in the cluster (names)
    quality: dict[str, Any] = field(default_factory=dict)  # variant -> the quality.json its evaluation writes
    evaluation: dict[str, str] = field(default_factory=dict)  # variant -> its evaluation Job's outcome, as `outcome`
    _seen: dict[str, int] = field(default_factory=dict)

    def create(self, objects: list[dict[str, Any]]) -> None:
        self.calls.append(("create", [(o["kind"], o["metadata"]["name"]) for o in objects]))
        for o in objects:
            if o["metadata"]["name"] in self.existing:
                raise KubectlRefused(f'jobs.batch "{o["metadata"]["name"]}" already exists')
            self.existing.add(o["metadata"]["name"])
            self.applied.append(o)

    def delete(self, namespace: str, name: str) -> None:
        self.calls.append(("delete", namespace, name))
        self.existing.discard(name)

    def state(self, namespace: str, name: str) -> JobState:
        self.calls.append(("state", namespace, name))
        if self.interrupt_after is not None and len([c for c in self.calls if c[0] == "state"]) > self.interrupt_after:
            raise KeyboardInterrupt
        self._seen[name] = self._seen.get(name, 0) + 1
        job = next(o for o in self.applied if o["kind"] == "Job" and o["metadata"]["name"] == name)
        variant = job["metadata"]["labels"]["app.kubernetes.io/component"]
        if job["metadata"]["labels"]["app.kubernetes.io/name"] == "model-evaluation":
            return self._evaluation(job, variant, self._seen[name])
        if self.outcome.get(variant) == "unschedulable":
            return JobState(
                "pending",
                unschedulable="0/3 nodes are available: 3 Insufficient nvidia.com/gpu; "
                "cluster autoscaler: pod didn't trigger scale-up: 1 max node "
                "group size reached",
            )
        if self._seen[name] < self.polls or self.outcome.get(variant) == "running":
            return JobState("running")
        prefix = job["metadata"]["annotations"]["mlinfra.io/target"].split("/", 3)[3]
        outcome = self.outcome.get(variant, "succeeded")
        body = f"{variant} weights".encode()
        self.store.put(prefix + "model.bin", body)
        if outcome == "failed":
            return JobState("failed", "BackoffLimitExceeded: Job has reached the specified backoff limit")
        report = {
            "compilerVersion": "neuronx-cc 2.19" if variant == "neuron" else "cuda 13.0",
            "runtimeVersion": "vllm 0.33.0",
            "node": "ip-10-80-1-1.ec2.internal",
            "files": [
                {
                    "path": "model.bin",
                    "size": len(body) + (1 if outcome == "bad-report" else 0),
                    "sha256": hashlib.sha256(body).hexdigest(),
                }
            ],
        }
        self.store.put(prefix + "conversion.json", json.dumps(report).encode())
        return JobState("succeeded")

    def _evaluation(self, job: dict[str, Any], variant: str, seen: int) -> JobState:
        """An evaluation Job: it reads what its annotations name and uploads the quality.json scripted in
        `quality` (none when absent) to its target, or fails or never ends as scripted in `evaluation`; a reference
        Job (component `reference`, scripted as "reference") uploads its figures."""
        outcome = self.evaluation.get(variant, "succeeded")
        if outcome == "unschedulable":
            return JobState("pending", unschedulable="0/3 nodes are available: 3 Insufficient nvidia.com/gpu")
        if seen < self.polls or outcome == "running":
            return JobState("running")
        if outcome == "failed":
            return JobState("failed", "PodFailurePolicy: Container evaluate for pod models/x exited with code 1")
        annotations = job["metadata"]["annotations"]
        reads = (
            ("mlinfra.io/reference",)
            if variant == "reference"
            else ("mlinfra.io/variant", "mlinfra.io/reference-figures")
        )
        for source in (*reads, "mlinfra.io/evaluation-data"):
            assert self.store.list(annotations[source].split("/", 3)[3]), f"{source}: nothing to read"
        if variant == "reference":
            for target in annotations["mlinfra.io/target"].split(","):
                self.store.put(target.split("/", 3)[3], b'{"format": "mlinfra-reference-figures/1"}')
        elif variant in self.quality:
            key = annotations["mlinfra.io/target"].split("/", 3)[3]
            self.store.put(key, json.dumps(self.quality[variant]).encode())
        return JobState("succeeded")


def serving_config() -> dict[str, Any]:
    """The demo serving stack's config, as the stack file holds it (mistral-7b follows `production`)."""
    return stack_config(load_project(), "serving-demo")


def promotion_world() -> World:
    # The recording backend's `up` replaces a stack's outputs with deploy_outputs (and notes their runId).
    serving_outputs = {"clusterName": "mlinfra-serving-demo", "converterRoleArn": CONVERTER_ROLE_ARN}
    world = World(deploy_outputs={**serving_outputs, "runId": "-"})
    world.stacks["serving-demo"] = StackState(serving_config(), outputs=serving_outputs, resources=True)
    world.stacks["registry"] = StackState(
        {"mlinfra:kind": "registry"},
        outputs={
            "bucketName": BUCKET,
            "bucketArn": f"arn:aws:s3:::{BUCKET}",
            "region": "us-east-1",
            "kmsKeyArn": KEY_ARN,
        },
        resources=True,
    )
    return world


def credential_process_argv(job: dict[str, Any]) -> list[str]:
    """The credential process a Job's `credentials` step writes, as the shell splits it."""
    [step] = [c for c in job["spec"]["template"]["spec"]["initContainers"] if c["name"] == "credentials"]
    script = step["command"][-1]
    body = script.split(f"cat > {access.PROCESS_FILE} <<'MLINFRA_EOF'\n", 1)[1].split("\nMLINFRA_EOF", 1)[0]
    return shlex.split(body)
