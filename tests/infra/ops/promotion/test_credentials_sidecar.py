"""The conversion Job's credentials sidecar and S3 steps, run under sh with a stand-in `aws` (paths under /aws moved
to a temporary directory): the first session is proven and marked ready, sessions are refreshed until the pod
stops the sidecar (SIGTERM ends it at once), a first assume that fails makes the S3 steps fail at once, and the
S3 steps run with the down-scoped config only, never the pod's container credentials."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.infra.ops.promotion.test_jobs import conversion

# The assume counter is replaced by rename, as the sidecar replaces its session: a poll never reads it half-written.
STAND_IN = """#!/bin/sh
echo "$* | uri=${AWS_CONTAINER_CREDENTIALS_FULL_URI:-} config=${AWS_CONFIG_FILE:-}" >> "$CALLS"
case "$1 $2" in
  "sts assume-role")
    [ -e "$STATE/refuse" ] && { echo "AccessDenied" >&2; exit 254; }
    n=$(($(cat "$STATE/n" 2>/dev/null || echo 0) + 1)); echo $n > "$STATE/n.new"; mv "$STATE/n.new" "$STATE/n"
    printf '{"Version": 1, "AccessKeyId": "ASIA%s", "SecretAccessKey": "s", "SessionToken": "t", ' "$n"
    echo '"Expiration": "2099-01-01T00:00:00Z"}' ;;
  "sts get-caller-identity") echo "arn:aws:sts::1:assumed-role/converter/promote" ;;
  "s3 sync"|"s3 cp") exit 0 ;;
esac
"""


def steps(variant: str = "neuron") -> dict[str, dict]:
    pod = conversion(variant)["spec"]["template"]["spec"]
    return {c["name"]: c for c in pod["initContainers"] + pod["containers"]}


@pytest.fixture
def world(tmp_path: Path) -> dict:
    bin_dir, state, aws_dir = tmp_path / "bin", tmp_path / "state", tmp_path / "aws"
    for d in (bin_dir, state, aws_dir):
        d.mkdir()
    (bin_dir / "aws").write_text(STAND_IN, encoding="utf-8")
    (bin_dir / "aws").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "CALLS": str(state / "calls"),
        "STATE": str(state),
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://169.254.170.23/v1/credentials",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": "/var/run/secrets/pods.eks.amazonaws.com/token",
    }
    return {"env": env, "state": state, "aws": aws_dir}


def script(step: dict, aws_dir: Path) -> str:
    return step["command"][-1].replace("/aws/", f"{aws_dir}/")


def wait_for(predicate, seconds: float = 10.0) -> None:
    end = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def test_the_sidecar_proves_refreshes_and_stops_on_sigterm(world):
    sidecar = subprocess.Popen(
        ["sh", "-c", script(steps()["credentials"], world["aws"])],
        env={**world["env"], "MLINFRA_REFRESH_SECONDS": "0.2"},
    )
    try:
        wait_for(lambda: (world["aws"] / "ready").exists())
        assert json.loads((world["aws"] / "session.json").read_text(encoding="utf-8"))["Version"] == 1
        assert (world["aws"] / "config").read_text(
            encoding="utf-8"
        ) == f"[default]\ncredential_process = /bin/cat {world['aws']}/session.json\n"
        wait_for(lambda: int((world["state"] / "n").read_text(encoding="utf-8")) >= 3)  # refreshed, not written once
        assert json.loads((world["aws"] / "session.json").read_text(encoding="utf-8"))["AccessKeyId"] != "ASIA1"
        sidecar.send_signal(signal.SIGTERM)
        assert sidecar.wait(timeout=5) == 0
    finally:
        sidecar.kill()
    calls = (world["state"] / "calls").read_text(encoding="utf-8").splitlines()
    identity = [c for c in calls if c.startswith("sts get-caller-identity")]
    # The proof reads the down-scoped config, not the pod's container credentials.
    assert identity == [f"sts get-caller-identity --output text --query Arn | uri= config={world['aws']}/config"]
    assert not (world["aws"] / "failed").exists()


def test_a_role_that_cannot_be_assumed_fails_the_s3_steps_at_once(world):
    (world["state"] / "refuse").touch()
    sidecar = subprocess.Popen(["sh", "-c", script(steps()["credentials"], world["aws"])], env=world["env"])
    try:
        wait_for(lambda: (world["aws"] / "ready").exists())
        assert "cannot assume arn:aws:iam::" in (world["aws"] / "failed").read_text(encoding="utf-8")
        assert sidecar.poll() is None  # a sidecar that exits would be restarted; it waits for the pod to end
        fetch = subprocess.run(
            ["sh", "-c", script(steps()["fetch"], world["aws"])], env=world["env"], capture_output=True, text=True
        )
        assert fetch.returncode == 1 and "cannot assume" in fetch.stderr
        assert not [
            c for c in (world["state"] / "calls").read_text(encoding="utf-8").splitlines() if c.startswith("s3 ")
        ]
    finally:
        sidecar.send_signal(signal.SIGTERM)
        sidecar.wait(timeout=5)


@pytest.mark.parametrize("name", ["fetch", "upload"])
def test_the_s3_steps_run_without_the_pods_credentials(world, name):
    step = steps()[name]
    env = {**world["env"], **{e["name"]: e["value"] for e in step["env"] if "value" in e}}
    env["AWS_CONFIG_FILE"] = str(world["aws"] / "config")
    done = subprocess.run(["sh", "-c", script(step, world["aws"])], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    calls = (world["state"] / "calls").read_text(encoding="utf-8").splitlines()
    assert calls and all(c.startswith("s3 ") and f" | uri= config={world['aws']}/config" in c for c in calls)
    assert {"name": "AWS_SHARED_CREDENTIALS_FILE", "value": "/dev/null"} in step["env"]
