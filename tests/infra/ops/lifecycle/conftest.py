"""The moto server on loopback (a real HTTP AWS endpoint, started and stopped here) and clients for it; the GCP
emulators (Cloud Storage, and ours for Compute Engine, Managed Lustre and Cloud Asset Inventory) and an adapter
on them."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest

from tests.infra.ops.lifecycle import gcp_world
from tests.infra.ops.lifecycle.aws_world import REGION, make_registry
from tests.infra.ops.lifecycle.gcp_emulator import GcpEmulator

LAUNCHER = Path(__file__).with_name("moto_launcher.py")


def _readable_within(stream, seconds: float) -> bool:
    """poll(), not select(): select cannot watch descriptors numbered 1024 or more."""
    poller = select.poll()
    poller.register(stream, select.POLLIN)
    return bool(poller.poll(seconds * 1000))


@pytest.fixture(scope="session")
def moto_url():
    """Start moto_launcher.py as a subprocess on 127.0.0.1; its URL; stopped at the session's end."""
    log = tempfile.NamedTemporaryFile(prefix="moto-server-", suffix=".log", delete=False)
    proc = subprocess.Popen(
        [sys.executable, str(LAUNCHER)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        ready = _readable_within(proc.stdout, 60)
        line = proc.stdout.readline() if ready else ""
        if not line.startswith("READY "):
            log.flush()
            raise RuntimeError(
                f"moto server did not start (exit {proc.poll()}): {Path(log.name).read_text(encoding='utf-8')[-2000:]}"
            )
        url = f"http://127.0.0.1:{int(line.split()[1])}"
        _wait_until_answering(url)
        yield url
    finally:
        proc.stdin.close()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        os.unlink(log.name)


def _wait_until_answering(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/moto-api/data.json", timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"{}")


@pytest.fixture
def aws(moto_url, monkeypatch):
    """boto3 clients against a freshly reset moto server; env points every boto3 client at it."""
    _post(f"{moto_url}/moto-api/reset", {})
    _post(f"{moto_url}/moto-api/mlinfra/faults", {"Faults": []})
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_REGION", REGION)
    session = boto3.session.Session(region_name=REGION)
    names = {
        "ec2": "ec2",
        "s3": "s3",
        "fsx": "fsx",
        "logs": "logs",
        "iam": "iam",
        "kms": "kms",
        "tagging": "resourcegroupstaggingapi",
        "lambda_": "lambda",
    }
    clients = {attr: session.client(service) for attr, service in names.items()}

    def set_task(task_id: str, lifecycle: str, message: str = "") -> None:
        """Emulator extension: finish (or fail) a data repository task, as the real service would."""
        _post(
            f"{moto_url}/moto-api/fsx/data-repository-task",
            {"TaskId": task_id, "Lifecycle": lifecycle, "FailureMessage": message},
        )

    def set_file_system(fs_id: str, lifecycle: str) -> None:
        """Emulator extension: move a file system on, e.g. finish its deletion ("DELETED")."""
        _post(f"{moto_url}/moto-api/fsx/file-system", {"FileSystemId": fs_id, "Lifecycle": lifecycle})

    def inject_faults(*faults: dict[str, Any]) -> None:
        """Emulator extension: the next calls of an action answer with an AWS error
        ({"Action": "DescribeInstances", "Code": "RequestLimitExceeded", "Status": 503, "Count": 2})."""
        _post(f"{moto_url}/moto-api/mlinfra/faults", {"Faults": list(faults)})

    def set_association(association_id: str, lifecycle: str) -> None:
        """Emulator extension: an association mid-update (UPDATING) or done (AVAILABLE)."""
        _post(f"{moto_url}/moto-api/fsx/association", {"AssociationId": association_id, "Lifecycle": lifecycle})

    def set_quota(service_code: str, quota_code: str, name: str, value: float, default: bool = False) -> None:
        """Emulator extension: the applied value of a Service Quotas quota in the test region, or (default=True)
        AWS's default for it (moto_quotas.py)."""
        body = {"ServiceCode": service_code, "QuotaCode": quota_code, "QuotaName": name, "Value": value}
        _post(f"{moto_url}/moto-api/servicequotas/quota", {"Region": REGION, "Default": default, **body})

    return SimpleNamespace(
        url=moto_url,
        session=session,
        set_quota=set_quota,
        set_task=set_task,
        set_file_system=set_file_system,
        set_association=set_association,
        inject_faults=inject_faults,
        **clients,
    )


@pytest.fixture
def registry(aws) -> str:
    return make_registry(aws)


@pytest.fixture(scope="session")
def gcs_url():
    """gcp-storage-emulator in this process, in memory, holding the run's data bucket."""
    from gcp_storage_emulator.server import create_server

    port = gcp_world.free_port()
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket=gcp_world.BUCKET)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def gcp(gcs_url):
    """A fresh Compute/Lustre/Asset emulator, and the storage emulator emptied but for the bucket."""
    import requests

    emulator = GcpEmulator(gcp_world.PROJECT)
    base = emulator.start()
    emulator.base = base
    emulator.endpoints = {
        "compute": f"{base}/compute/v1",
        "iam": f"{base}/iam/v1",
        "lustre": f"{base}/lustre/v1",
        "asset": f"{base}/asset/v1",
        "scheduler": f"{base}/scheduler/v1",
        "storage": f"{gcs_url}/storage/v1",
        "upload": f"{gcs_url}/upload/storage/v1",
    }
    emulator.storage = gcs_url
    assert requests.get(f"{gcs_url}/wipe", params={"keep-buckets": "true"}).status_code == 200
    yield emulator
    emulator.stop()


@pytest.fixture
def gcp_cloud(gcp):
    import requests

    from infra.ops.lifecycle.gcp.cloud import GcpRunCloud
    from run_guard_gcp.api import GcpApi

    return GcpRunCloud(
        gcp_world.PROJECT, gcp_world.BUCKET, api=GcpApi(requests.Session(), gcp.endpoints), sleep=lambda s: None
    )
