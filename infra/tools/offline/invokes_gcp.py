"""Documented offline answers to the pulumi-gcp functions programs call: the project's Google-managed service
agents, with a placeholder project number (`pulumi up` asks Google instead)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from infra.providers import tokens

OFFLINE_PROJECT_NUMBER = "100000000001"  # placeholder: real project numbers come from Google
OFFLINE_STS_SUBJECT_ID = "100000000000000000001"  # placeholder numeric subject id of the STS agent


def _project(config: dict[str, Any], args: dict[str, Any]) -> str:
    return args.get("project") or config.get("gcp:project") or "offline-project"


def _gcs_agent(config: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    email = f"service-{OFFLINE_PROJECT_NUMBER}@gs-project-accounts.iam.gserviceaccount.com"
    return {"emailAddress": email, "member": f"serviceAccount:{email}", "project": _project(config, args), "id": email}


def _transfer_agent(config: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    email = f"project-{OFFLINE_PROJECT_NUMBER}@storage-transfer-service.iam.gserviceaccount.com"
    return {
        "email": email,
        "member": f"serviceAccount:{email}",
        "subjectId": OFFLINE_STS_SUBJECT_ID,
        "project": _project(config, args),
        "id": email,
    }


GCP_ANSWERS: dict[str, tuple[Callable[[dict, dict], dict], str]] = {
    tokens.GCP_STORAGE_GET_PROJECT_SERVICE_ACCOUNT: (
        _gcs_agent,
        f"the Cloud Storage service agent of project number {OFFLINE_PROJECT_NUMBER} (placeholder)",
    ),
    tokens.GCP_STORAGE_GET_TRANSFER_PROJECT_SERVICE_ACCOUNT: (
        _transfer_agent,
        f"the Storage Transfer Service agent of project number {OFFLINE_PROJECT_NUMBER} with subject "
        f"id {OFFLINE_STS_SUBJECT_ID} (placeholders)",
    ),
}
