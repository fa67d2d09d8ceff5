"""`Jobs` through kubectl (the `kubernetes` Python client is not a dependency). Not exercised against a
cluster from this repository: see the README's "Promotion" section."""
from __future__ import annotations

import json
import subprocess
from typing import Any, Optional

from infra.promotion.ports import JobState


class KubectlError(Exception):
    pass


class KubectlJobs:
    def __init__(self, kubeconfig: Optional[str] = None, kubectl: str = "kubectl"):
        self._base = [kubectl] + (["--kubeconfig", kubeconfig] if kubeconfig else [])

    def apply(self, objects: list[dict[str, Any]]) -> None:
        # Server-side apply: creates what is missing, leaves an identical object alone.
        document = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
        self._run(["apply", "--server-side", "--field-manager", "mlinfra-promote", "-f", "-"], document)

    def state(self, namespace: str, name: str) -> JobState:
        job = json.loads(self._run(["get", "job", name, "-n", namespace, "-o", "json"]))
        return job_state(job)

    def _run(self, args: list[str], stdin: Optional[str] = None) -> str:
        try:
            done = subprocess.run(self._base + args, input=stdin, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise KubectlError(f"kubectl {args[0]}: {error}") from None
        if done.returncode != 0:
            raise KubectlError(f"kubectl {args[0]} failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}")
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
