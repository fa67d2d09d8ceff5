"""The GCP run guard's events and settings for its tests: the Pub/Sub CloudEvent data Eventarc delivers for the
bucket's notification (JSON_API_V1 payload) and for the scheduler's tick, and the function's environment as
components/training/gcp/run_guard.py sets it."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import requests

from run_guard_gcp.api import GcpApi
from tests.infra.ops.lifecycle.gcp_world import BUCKET, PROJECT, RUN, ZONE

EXPIRES_AT = "2026-03-02T10:00:00Z"
EXPIRY = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
BEFORE = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
INSTANCE = f"projects/{PROJECT}/locations/{ZONE}/instances/mlinfra-{RUN}"


def guard_env(run: str = RUN, **changes: str) -> dict[str, str]:
    env = {
        "MLINFRA_PROJECT": PROJECT,
        "MLINFRA_RUN_ID": run,
        "MLINFRA_DATA_BUCKET": BUCKET,
        "MLINFRA_LUSTRE_INSTANCE": f"projects/{PROJECT}/locations/{ZONE}/instances/mlinfra-{run}",
        "MLINFRA_RUN_LABEL": f"mlinfra-run-id={run}",
        "MLINFRA_EXPIRES_AT": EXPIRES_AT,
        "MLINFRA_TEARDOWN_ON_COMPLETION": "true",
        "MLINFRA_EXPORT_CHECKPOINTS": "true",
    }
    env.update(changes)
    return env


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def tick(published: datetime) -> dict:
    """A Cloud Scheduler tick as Eventarc delivers the Pub/Sub message (attributes only, as the job publishes)."""
    return {
        "message": {"attributes": {"mlinfra-guard": "tick"}, "messageId": "1", "publishTime": _rfc3339(published)},
        "subscription": f"projects/{PROJECT}/subscriptions/eventarc-us-central1-mlinfra-{RUN}-guard-000",
    }


def object_event(name: str, published: datetime, bucket: str = BUCKET) -> dict:
    """A Cloud Storage OBJECT_FINALIZE notification (payload JSON_API_V1: the object's resource) as delivered."""
    resource = {"kind": "storage#object", "bucket": bucket, "name": name, "generation": "1700000000000000"}
    return {
        "message": {
            "attributes": {
                "bucketId": bucket,
                "objectId": name,
                "eventType": "OBJECT_FINALIZE",
                "payloadFormat": "JSON_API_V1",
                "notificationConfig": f"projects/_/buckets/{bucket}/notificationConfigs/1",
                "objectGeneration": "1700000000000000",
                "eventTime": _rfc3339(published),
            },
            "data": base64.b64encode(json.dumps(resource).encode()).decode(),
            "messageId": "2",
            "publishTime": _rfc3339(published),
        },
        "subscription": f"projects/{PROJECT}/subscriptions/eventarc-us-central1-mlinfra-{RUN}-guard-000",
    }


def guard_api(gcp) -> GcpApi:
    return GcpApi(requests.Session(), gcp.endpoints)


def guard_object(gcp, name: str) -> dict | None:
    """A record or report of the guard, read back from the bucket."""
    done = requests.get(f"{gcp.storage}/storage/v1/b/{BUCKET}/o/{requests.utils.quote(name, safe='')}?alt=media")
    return json.loads(done.content) if done.status_code == 200 else None


def guard_objects(gcp, run: str = RUN) -> list[str]:
    listed = requests.get(f"{gcp.storage}/storage/v1/b/{BUCKET}/o", params={"prefix": f"runs/{run}/guard/"})
    return sorted(item["name"] for item in listed.json().get("items", []))
