"""A GCP run laid out in the emulators as the training-gcp stack leaves it: Cloud Storage is the
`gcp-storage-emulator` package (in this process), Compute Engine, Managed Lustre and Cloud Asset Inventory are
`gcp_emulator` (ours, as no published one exists). The fixtures are in conftest.py."""

from __future__ import annotations

import socket

import requests

from tests.infra.ops.lifecycle.gcp_emulator import GcpEmulator

PROJECT, ZONE, BUCKET = "mlinfra-test", "us-central1-a", "mlinfra-training-test"
RUN, OTHER = "llama-gcp-001", "other-run"
LABEL = "mlinfra-run-id"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def put_object(storage: str, name: str, body: bytes) -> None:
    """Upload as the nodes' `gcloud storage cp` would (octet-stream: the emulator parses JSON bodies)."""
    done = requests.post(
        f"{storage}/upload/storage/v1/b/{BUCKET}/o",
        params={"uploadType": "media", "name": name},
        data=body,
        headers={"Content-Type": "application/octet-stream"},
    )
    assert done.status_code == 200, done.text


def seed_run(gcp: GcpEmulator, run: str = RUN, nodes: int = 2) -> str:
    """The run's nodes (with their boot disks) and its file system; the file system's full name."""
    for i in range(nodes):
        gcp.add_instance(ZONE, f"mlinfra-{run}-node-{i}", {LABEL: run, "mlinfra-role": "training"})
        gcp.add_disk(ZONE, f"mlinfra-{run}-node-{i}", {LABEL: run})
    return gcp.add_file_system(ZONE, f"mlinfra-{run}", {LABEL: run})
