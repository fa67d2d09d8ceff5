"""A thin client of the Google Cloud REST APIs the GCP run guard and the GCP lifecycle need (Compute Engine, Cloud
Storage, Managed Lustre, Cloud Asset Inventory), over an authorized `requests` session. It lives in the guard's
package because the guard is deployed as-is; the lifecycle (infra/ops/lifecycle/gcp/) imports it from here.

REST rather than four generated client libraries: a handful of calls, one error type, and endpoints that a
test can point at a local emulator (`STORAGE_EMULATOR_HOST` for Cloud Storage, as Google's own clients read
it; `MLINFRA_GCP_API_ENDPOINT` for the others, a test-only override).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

DEFAULT_ENDPOINTS = {
    "compute": "https://compute.googleapis.com/compute/v1",
    "iam": "https://iam.googleapis.com/v1",
    "storage": "https://storage.googleapis.com/storage/v1",
    "upload": "https://storage.googleapis.com/upload/storage/v1",
    "lustre": "https://lustre.googleapis.com/v1",
    "asset": "https://cloudasset.googleapis.com/v1",
    "scheduler": "https://cloudscheduler.googleapis.com/v1",
}
SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
TIMEOUT_SECONDS = 60
# Throttling and transient server errors are retried (as boto3 does on AWS): 5 attempts over about 30 s.
# POSTs are retried too: the one this adapter makes (exportData) carries a requestId, so a retry is not a
# second export.
RETRY: dict[str, Any] = {
    "total": 5,
    "backoff_factor": 2,
    "status_forcelist": (429, 500, 502, 503, 504),
    "allowed_methods": frozenset({"GET", "DELETE", "POST"}),
    "raise_on_status": False,
}


class GcpApiError(Exception):
    """A Google API answered with an error (or could not be reached): `status` is the HTTP status (0: no
    answer), `reason` Google's error status or reason, e.g. NOT_FOUND, PERMISSION_DENIED, notFound."""

    def __init__(self, status: int, reason: str, message: str, method: str = "", url: str = ""):
        super().__init__(f"{reason}: {message}")
        self.status, self.reason, self.message, self.method, self.url = status, reason, message, method, url


def endpoints_from_environment(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    endpoints = dict(DEFAULT_ENDPOINTS)
    base = environ.get("MLINFRA_GCP_API_ENDPOINT", "").rstrip("/")
    if base:
        endpoints.update(
            compute=f"{base}/compute/v1",
            iam=f"{base}/iam/v1",
            lustre=f"{base}/lustre/v1",
            asset=f"{base}/asset/v1",
            scheduler=f"{base}/scheduler/v1",
        )
    storage = environ.get("STORAGE_EMULATOR_HOST", "").rstrip("/")
    if storage:
        host = storage if "://" in storage else "http://" + storage
        endpoints.update(storage=f"{host}/storage/v1", upload=f"{host}/upload/storage/v1")
    return endpoints


def default_session() -> Any:
    """An authorized session with Application Default Credentials (`gcloud auth application-default
    login`, a service account key, or the metadata server); anonymous only when every API but Cloud Storage
    is redirected to an emulator (a stray STORAGE_EMULATOR_HOST alone must not send real calls unsigned)."""
    import google.auth
    from google.auth.credentials import AnonymousCredentials
    from google.auth.transport.requests import AuthorizedSession

    if os.environ.get("MLINFRA_GCP_API_ENDPOINT"):
        return AuthorizedSession(AnonymousCredentials())
    credentials, _ = google.auth.default(scopes=list(SCOPES))
    return AuthorizedSession(credentials)


def with_retries(session: Any) -> Any:
    """Mount the RETRY policy on a requests session (AuthorizedSession is one)."""
    from requests.adapters import HTTPAdapter
    from urllib3.util.retry import Retry

    adapter = HTTPAdapter(max_retries=Retry(**RETRY))
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return session


@dataclass
class GcpApi:
    """`session`: an authorized requests session; None: Application Default Credentials, looked up at the first
    call (so building the adapter needs no credentials, and a missing one surfaces where it is needed)."""

    session: Any = None
    endpoints: dict[str, str] = field(default_factory=endpoints_from_environment)

    def url(self, service: str, path: str) -> str:
        return f"{self.endpoints[service]}/{path.lstrip('/')}"

    def call(
        self,
        method: str,
        service: str,
        path: str,
        params: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
        raw: bool = False,
        data: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        url = self.url(service, path)
        import requests

        if self.session is None:
            self.session = with_retries(default_session())
        try:
            response = self.session.request(
                method, url, params=params, json=body, data=data, headers=headers, timeout=TIMEOUT_SECONDS
            )
        except requests.RequestException as error:
            raise GcpApiError(0, type(error).__name__, str(error), method, url) from error
        if response.status_code >= 400:
            reason, message = _error_of(response)
            raise GcpApiError(response.status_code, reason, message, method, url)
        if raw:
            return response.content
        try:
            return response.json() if response.content else {}
        except ValueError:
            raise GcpApiError(response.status_code, "invalid-json", _one_line(response.text), method, url) from None

    def get(self, service: str, path: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self.call("GET", service, path, params=params)

    def pages(self, service: str, path: str, params: Mapping[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Every page of a list call, one response at a time (following `nextPageToken`). A list that says part
        of it could not be read (`unreachables`, `unreachable`, or a scope's UNREACHABLE warning) is an error:
        read as "nothing there", it would let a teardown miss running nodes or a file system."""
        query = dict(params or {})
        while True:
            page = self.get(service, path, query)
            unreachable = list(page.get("unreachables") or page.get("unreachable") or [])
            items = page.get("items")
            if isinstance(items, dict):
                unreachable += [
                    scope
                    for scope, listed in items.items()
                    if ((listed or {}).get("warning") or {}).get("code") == "UNREACHABLE"
                ]
            if unreachable:
                raise GcpApiError(
                    0,
                    "UNREACHABLE",
                    f"part of the list could not be read: {', '.join(unreachable)}; nothing was changed, try again",
                    "GET",
                    self.url(service, path),
                )
            yield page
            token = page.get("nextPageToken")
            if not token:
                return
            query["pageToken"] = token

    def create_object(self, bucket: str, name: str, content: bytes) -> bool:
        """Create the object only if it does not exist (ifGenerationMatch=0); False when it already existed."""
        try:
            self.call(
                "POST",
                "upload",
                f"b/{quote(bucket, safe='')}/o",
                params={"uploadType": "media", "name": name, "ifGenerationMatch": "0"},
                data=content,
                headers={"Content-Type": "application/octet-stream"},
            )
            return True
        except GcpApiError as error:
            if error.status == 412:
                return False
            raise

    def object_media(self, bucket: str, name: str) -> bytes | None:
        """The object's bytes, None when it does not exist."""
        try:
            return self.call(
                "GET",
                "storage",
                f"b/{quote(bucket, safe='')}/o/{quote(name, safe='')}",
                params={"alt": "media"},
                raw=True,
            )
        except GcpApiError as error:
            if error.status == 404:
                return None
            raise


def _error_of(response: Any) -> tuple[str, str]:
    """(reason, message) of a Google error body {"error": {"code", "message", "status", "errors": [...]}}."""
    try:
        error = response.json().get("error", {})
    except ValueError:
        error = {}
    if not isinstance(error, dict):
        error = {"message": str(error)}
    reasons = [e.get("reason") for e in error.get("errors", []) if isinstance(e, dict) and e.get("reason")]
    reason = error.get("status") or (reasons[0] if reasons else "") or f"HTTP {response.status_code}"
    message = error.get("message") or _one_line(response.text or "") or "no message"
    return str(reason), _one_line(str(message))


def _one_line(text: str, limit: int = 300) -> str:
    return " ".join(text.split())[:limit]
