"""`Jobs` through kubectl (the `kubernetes` Python client is not a dependency). Not exercised against a
cluster from this repository: see the README's "Promotion" section."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from infra.ops.promotion.ports import JobState


class KubectlError(Exception):
    pass


class KubectlJobs:
    def __init__(self, kubeconfig: str | None = None, kubectl: str = "kubectl"):
        self._base = [kubectl] + (["--kubeconfig", kubeconfig] if kubeconfig else [])

    def create(self, objects: list[dict[str, Any]]) -> None:
        # `create`, not `apply`: an existing Job of the same name is an error (AlreadyExists), never adopted
        # or changed, so a second promotion cannot take over the first one's Jobs.
        for manifest in objects:
            self._run(["create", "-f", "-"], json.dumps(manifest))

    def state(self, namespace: str, name: str) -> JobState:
        job = json.loads(self._run(["get", "job", name, "-n", namespace, "-o", "json"]))
        state = job_state(job)
        if state.state in ("succeeded", "failed"):
            return state
        pods = json.loads(
            self._run(["get", "pods", "-n", namespace, "-l", f"batch.kubernetes.io/job-name={name}", "-o", "json"])
        )
        waiting = unschedulable(pods.get("items") or [])
        if not waiting:
            return state
        pod, message = waiting
        events = json.loads(
            self._run(
                [
                    "get",
                    "events",
                    "-n",
                    namespace,
                    "--field-selector",
                    f"involvedObject.name={pod},reason=NotTriggerScaleUp",
                    "-o",
                    "json",
                ]
            )
        )
        return JobState("pending", "", scale_up_message(message, events.get("items") or []))

    def delete(self, namespace: str, name: str) -> None:
        self._run(["delete", "job", name, "-n", namespace, "--cascade=background", "--ignore-not-found"])

    def _run(self, args: list[str], stdin: str | None = None) -> str:
        try:
            done = subprocess.run(self._base + args, input=stdin, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise KubectlError(f"kubectl {args[0]}: {error}") from None
        if done.returncode != 0:
            raise KubectlError(
                f"kubectl {args[0]} failed: "
                f"{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}"
            )
        return done.stdout


def job_state(job: dict[str, Any]) -> JobState:
    """A batch/v1 Job's status as one of pending/running/succeeded/failed."""
    status = job.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Complete":
            return JobState("succeeded")
        if condition.get("type") == "Failed":
            return JobState("failed", condition.get("message") or condition.get("reason") or "")
    return JobState("running" if status.get("active") else "pending")


def unschedulable(pods: list[dict[str, Any]]) -> tuple[str, str] | None:
    """(pod name, scheduler message) of the first pod whose PodScheduled condition is False/Unschedulable."""
    for pod in pods:
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if (
                condition.get("type") == "PodScheduled"
                and condition.get("status") == "False"
                and condition.get("reason") == "Unschedulable"
            ):
                return pod["metadata"]["name"], condition.get("message") or "Unschedulable"
    return None


def scale_up_message(message: str, events: list[dict[str, Any]]) -> str:
    """The scheduler's message, and the cluster autoscaler's latest NotTriggerScaleUp reason when it gave one."""
    latest = max(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "", default=None)
    if latest and latest.get("message"):
        return f"{message}; cluster autoscaler: {latest['message']}"
    return message
