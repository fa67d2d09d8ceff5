"""A local HTTP emulator of the Google Cloud REST calls the GCP lifecycle makes (Compute Engine, Managed Lustre,
Cloud Asset Inventory), for `GcpRunCloud`'s tests; Cloud Storage is the `gcp-storage-emulator` package.

There is no published emulator for these APIs, so this one is ours: it answers with the REST reference's
shapes (aggregated lists keyed by scope, zonal operations with `endTime`, long-running operations with
`done`/`error`/`metadata.target`/`metadata.verb`, `nextPageToken` paging, Google's error body) and keeps the
asynchrony that matters: a deleted instance is listed as STOPPING for a few more lists before it is gone, an
export runs for a few polls. Every request is recorded, so tests assert what was asked, not only the result.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

PAGE_SIZE = 3
LABEL_FILTER = re.compile(r'labels\.([a-z0-9_-]+)\s*=\s*"([^"]*)"')


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Export:
    """How the next exportData operations end: one outcome per export ("succeeded" or "failed"), each after
    `polls` reads of the operation list."""

    outcomes: list[str] = field(default_factory=list)
    polls: int = 2


class GcpEmulator:
    def __init__(self, project: str, clock: Callable[[], datetime] | None = None):
        self.project = project
        self.clock = clock or (lambda: datetime.now(UTC))
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str, dict[str, list[str]], Any]] = []
        self.accepted: list[tuple[str, str]] = []  # (method, path) of every change the emulator accepted
        self.instances: dict[tuple[str, str], dict[str, Any]] = {}
        self.deleting: dict[tuple[str, str], int] = {}  # lists left before a deleted instance is gone
        self.delete_lists = 2  # how many lists a deleted instance stays listed (STOPPING)
        self.lustre_deleted_at: dict[str, datetime] = {}  # file system -> when its deletion was asked
        self.operations: dict[str, dict[str, Any]] = {}  # compute zonal operations by name
        self.disks: dict[str, dict[str, Any]] = {}
        self.global_items: dict[str, list[dict[str, Any]]] = {"networks": [], "firewalls": [], "addresses": []}
        self.regional_items: dict[str, list[dict[str, Any]]] = {
            "subnetworks": [],
            "routers": [],
            "resourcePolicies": [],
        }
        self.file_systems: dict[str, dict[str, Any]] = {}
        self.lustre_operations: dict[str, dict[str, Any]] = {}
        self.lustre_polls: dict[str, int] = {}
        self.export = Export()
        self.assets: list[dict[str, Any]] = []
        self.service_accounts: set[str] = set()  # emails
        self.scheduler_jobs: set[str] = set()  # full names: projects/P/locations/L/jobs/J
        self.unreachable_zones: list[str] = []  # aggregated lists say these could not be read
        self.failing_deletes: dict[str, str] = {}  # instance name -> the error its delete operation ends with
        self.fail_next: list[tuple[int, str, str]] = []  # (status, reason, message) for the next requests
        self._ids = 0
        self._server: ThreadingHTTPServer | None = None

    # ---- seeding -----------------------------------------------------------------------------------------
    def link(self, path: str) -> str:
        return f"https://www.googleapis.com/compute/v1/projects/{self.project}/{path}"

    def add_instance(self, zone: str, name: str, labels: dict[str, str], status: str = "RUNNING") -> None:
        self.instances[(zone, name)] = {
            "kind": "compute#instance",
            "name": name,
            "status": status,
            "labels": labels,
            "zone": self.link(f"zones/{zone}"),
            "selfLink": self.link(f"zones/{zone}/instances/{name}"),
        }

    def add_disk(self, zone: str, name: str, labels: dict[str, str]) -> None:
        self.disks[f"{zone}/{name}"] = {
            "name": name,
            "labels": labels,
            "zone": self.link(f"zones/{zone}"),
            "selfLink": self.link(f"zones/{zone}/disks/{name}"),
        }

    def add_global(self, collection: str, name: str) -> None:
        self.global_items[collection].append({"name": name, "selfLink": self.link(f"global/{collection}/{name}")})

    def add_regional(self, collection: str, region: str, name: str) -> None:
        self.regional_items[collection].append(
            {
                "name": name,
                "region": self.link(f"regions/{region}"),
                "selfLink": self.link(f"regions/{region}/{collection}/{name}"),
            }
        )

    def add_file_system(self, zone: str, instance_id: str, labels: dict[str, str], state: str = "ACTIVE") -> str:
        name = f"projects/{self.project}/locations/{zone}/instances/{instance_id}"
        self.file_systems[name] = {"name": name, "state": state, "labels": labels, "capacityGib": "9000"}
        return name

    def add_lustre_operation(
        self,
        instance: str,
        transfer: str,
        created: datetime,
        done: bool = True,
        error: str | None = None,
        path: str = "/checkpoints",
        uri: str = "",
        failed_files: int = 0,
    ) -> str:
        """A data transfer of `instance` ("EXPORT" or "IMPORT"), as ExportDataMetadata/ImportDataMetadata with
        its TransferOperationMetadata (paths, counters as int64 strings)."""
        name = self._lustre_operation_name(instance)
        kind = "ExportDataMetadata" if transfer == "EXPORT" else "ImportDataMetadata"
        paths = (
            {"sourceLustrePath": {"path": path}, "destinationGcsPath": {"uri": uri}}
            if transfer == "EXPORT"
            else {"sourceGcsPath": {"uri": uri}, "destinationLustrePath": {"path": path}}
        )
        self.lustre_operations[name] = {
            "name": name,
            "done": done,
            "metadata": {
                "@type": f"type.googleapis.com/google.cloud.lustre.v1.{kind}",
                "createTime": rfc3339(created),
                "target": instance,
                "verb": transfer.lower(),
                "operationMetadata": {
                    "transferType": transfer,
                    **paths,
                    "counters": {"objectsCopiedCount": "12", "objectsFailedCount": str(failed_files)},
                },
            },
            **({"error": {"code": 13, "message": error}} if error else {}),
            **({"response": {}} if done and not error else {}),
        }
        return name

    def _lustre_operation_name(self, instance: str) -> str:
        self._ids += 1
        return f"{instance.split('/instances/', 1)[0]}/operations/operation-{self._ids}"

    # ---- the server -------------------------------------------------------------------------------------
    def start(self) -> str:
        emulator = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                url = urlparse(self.path)
                status, payload = emulator.handle(method, unquote(url.path), parse_qs(url.query), body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_DELETE(self) -> None:
                self._serve("DELETE")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # shutdown() waits for the loop's next poll: 0.5 s by default, at the end of every test that uses it.
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    # ---- routing ----------------------------------------------------------------------------------------
    def handle(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        with self.lock:
            self.requests.append((method, path, query, body))
            if self.fail_next:
                status, reason, message = self.fail_next.pop(0)
                return status, _error(status, reason, message)
            p = re.escape(self.project)
            routes: list[tuple[str, str, Callable[..., tuple[int, Any]]]] = [
                ("GET", rf"^/compute/v1/projects/{p}/aggregated/(\w+)$", self._aggregated),
                ("DELETE", rf"^/compute/v1/projects/{p}/zones/([\w-]+)/instances/([\w-]+)$", self._delete_instance),
                ("GET", rf"^/compute/v1/projects/{p}/zones/([\w-]+)/operations/([\w-]+)$", self._zone_operation),
                ("GET", rf"^/compute/v1/projects/{p}/global/(\w+)$", self._global),
                ("GET", rf"^/lustre/v1/projects/{p}/locations/-/instances$", self._lustre_list),
                ("GET", rf"^/lustre/v1/(projects/{p}/locations/[\w-]+/instances/[\w-]+)$", self._lustre_get),
                ("POST", rf"^/lustre/v1/(projects/{p}/locations/[\w-]+/instances/[\w-]+):exportData$", self._export),
                ("DELETE", rf"^/lustre/v1/(projects/{p}/locations/[\w-]+/instances/[\w-]+)$", self._lustre_delete),
                ("GET", rf"^/lustre/v1/(projects/{p}/locations/[\w-]+)/operations$", self._lustre_operations),
                ("GET", rf"^/lustre/v1/(projects/{p}/locations/[\w-]+/operations/[\w-]+)$", self._lustre_operation),
                ("GET", rf"^/iam/v1/projects/{p}/serviceAccounts/([^/]+)$", self._service_account),
                ("GET", rf"^/asset/v1/projects/{p}:searchAllResources$", self._assets),
                ("GET", rf"^/scheduler/v1/(projects/{p}/locations/[\w-]+/jobs/[\w-]+)$", self._scheduler_job),
            ]
            for verb, pattern, handler in routes:
                match = re.match(pattern, path)
                if match and verb == method:
                    status, answer = handler(*match.groups(), query=query, body=body)
                    if method != "GET" and status < 400:
                        self.accepted.append((method, path))
                    return status, answer
            return 404, _error(404, "NOT_FOUND", f"no route {method} {path}")

    def _paged(
        self, items: list[Any], query: dict[str, list[str]], key: str, wrap: Callable[[list[Any]], Any]
    ) -> tuple[int, Any]:
        start = int(query.get("pageToken", ["0"])[0])
        page = items[start : start + PAGE_SIZE]
        answer: dict[str, Any] = {key: wrap(page)}
        if start + PAGE_SIZE < len(items):
            answer["nextPageToken"] = str(start + PAGE_SIZE)
        return 200, answer

    def _aggregated(self, collection: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        if collection == "instances":
            for key in list(self.deleting):  # each list brings a deleted instance closer to gone
                self.deleting[key] -= 1
                if self.deleting[key] <= 0:
                    del self.deleting[key], self.instances[key]
            items = [(f"zones/{zone}", i) for (zone, _), i in sorted(self.instances.items())]
        elif collection == "disks":
            items = [(f"zones/{d['zone'].rsplit('/', 1)[-1]}", d) for _, d in sorted(self.disks.items())]
        else:
            items = [(f"regions/{r['region'].rsplit('/', 1)[-1]}", r) for r in self.regional_items[collection]]
        wanted = LABEL_FILTER.search(query.get("filter", [""])[0])
        if wanted:
            items = [(scope, i) for scope, i in items if i.get("labels", {}).get(wanted.group(1)) == wanted.group(2)]

        def by_scope(page: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
            # as Compute Engine answers: scopes with nothing carry only a warning, unreadable ones say so
            grouped: dict[str, Any] = {
                "zones/us-east1-b": {"warning": {"code": "NO_RESULTS_ON_PAGE", "message": "There are no results"}}
            }
            for zone in self.unreachable_zones:
                grouped[f"zones/{zone}"] = {"warning": {"code": "UNREACHABLE", "message": f"{zone} is unreachable"}}
            for scope, item in page:
                grouped.setdefault(scope, {collection: []})[collection].append(item)
            return grouped

        return self._paged(items, query, "items", by_scope)

    def _delete_instance(self, zone: str, name: str, query: Any, body: Any) -> tuple[int, Any]:
        key = (zone, name)
        if key not in self.instances:
            return 404, _error(
                404, "notFound", f"The resource 'projects/{self.project}/zones/{zone}/instances/{name}' was not found"
            )
        if key in self.deleting:  # another operation (its deletion) runs on it
            return 400, _error(
                400,
                "resourceNotReady",
                f"The resource 'projects/{self.project}/zones/{zone}/instances/{name}' is not ready",
            )
        if name in self.failing_deletes:
            self._ids += 1
            op = f"operation-{self._ids}"
            self.operations[op] = {
                "kind": "compute#operation",
                "name": op,
                "operationType": "delete",
                "zone": zone,
                "targetLink": self.instances[key]["selfLink"],
                "instance": None,
                "status": "DONE",
                "selfLink": self.link(f"zones/{zone}/operations/{op}"),
                "httpErrorStatusCode": 403,
                "error": {"errors": [{"code": "PERMISSION_DENIED", "message": self.failing_deletes[name]}]},
            }
            return 200, {
                **{k: v for k, v in self.operations[op].items() if k not in ("instance", "error")},
                "status": "RUNNING",
            }
        self.instances[key]["status"] = "STOPPING"
        self.deleting.setdefault(key, self.delete_lists)
        self._ids += 1
        op = f"operation-{self._ids}"
        self.operations[op] = {
            "kind": "compute#operation",
            "name": op,
            "operationType": "delete",
            "zone": zone,
            "targetLink": self.instances[key]["selfLink"],
            "instance": key,
            "selfLink": self.link(f"zones/{zone}/operations/{op}"),
            "status": "RUNNING",
        }
        return 200, {k: v for k, v in self.operations[op].items() if k != "instance"}

    def _zone_operation(self, zone: str, op: str, query: Any, body: Any) -> tuple[int, Any]:
        operation = self.operations.get(op)
        if operation is None:
            return 404, _error(404, "notFound", f"operation {op} not found")
        if operation["status"] != "DONE" and operation["instance"] and operation["instance"] not in self.instances:
            operation.update(status="DONE", endTime=rfc3339(self.clock()))
        return 200, {k: v for k, v in operation.items() if k != "instance"}

    def _global(self, collection: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        return self._paged(self.global_items.get(collection, []), query, "items", list)

    def _lustre_list(self, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        items = list(self.file_systems.values())
        wanted = LABEL_FILTER.search(query.get("filter", [""])[0])
        if wanted:
            items = [fs for fs in items if fs["labels"].get(wanted.group(1)) == wanted.group(2)]
        return self._paged(items, query, "instances", list)

    def _lustre_get(self, name: str, query: Any, body: Any) -> tuple[int, Any]:
        if name not in self.file_systems:
            return 404, _error(404, "NOT_FOUND", f"Resource '{name}' was not found")
        return 200, self.file_systems[name]

    def _lustre_delete(self, name: str, query: Any, body: Any) -> tuple[int, Any]:
        """DELETE an instance: DELETING from then on (as Managed Lustre lists it while it goes), the time recorded."""
        if name not in self.file_systems:
            return 404, _error(404, "NOT_FOUND", f"Resource '{name}' was not found")
        self.file_systems[name]["state"] = "DELETING"
        self.lustre_deleted_at.setdefault(name, self.clock())
        operation = self._lustre_operation_name(name)
        return 200, {"name": operation, "done": False, "metadata": {"target": name, "verb": "delete"}}

    def _export(self, instance: str, query: Any, body: Any) -> tuple[int, Any]:
        if instance not in self.file_systems:
            return 404, _error(404, "NOT_FOUND", f"Resource '{instance}' was not found")
        if any(not op["done"] and op["metadata"]["target"] == instance for op in self.lustre_operations.values()):
            return 409, _error(409, "ABORTED", "unable to queue the operation")
        name = self.add_lustre_operation(
            instance, "EXPORT", self.clock(), done=False, path=body["lustrePath"]["path"], uri=body["gcsPath"]["uri"]
        )
        self.lustre_operations[name]["request"] = body
        self.lustre_polls[name] = self.export.polls
        return 200, {k: v for k, v in self.lustre_operations[name].items() if k != "request"}

    def _lustre_operations(self, location: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        for name, left in list(self.lustre_polls.items()):
            if left > 1:
                self.lustre_polls[name] = left - 1
                continue
            del self.lustre_polls[name]
            outcome = self.export.outcomes.pop(0) if self.export.outcomes else "succeeded"
            self.lustre_operations[name]["done"] = True
            if outcome == "failed":
                self.lustre_operations[name]["error"] = {"code": 13, "message": "export failed: 3 files not copied"}
            else:
                self.lustre_operations[name]["response"] = {}
        listed = [
            {k: v for k, v in op.items() if k != "request"}
            for name, op in self.lustre_operations.items()
            if name.startswith(location + "/")
        ]
        return self._paged(listed, query, "operations", list)

    def _lustre_operation(self, name: str, query: Any, body: Any) -> tuple[int, Any]:
        if name not in self.lustre_operations:
            return 404, _error(404, "NOT_FOUND", f"operation {name} not found")
        return 200, {k: v for k, v in self.lustre_operations[name].items() if k != "request"}

    def _service_account(self, email: str, query: Any, body: Any) -> tuple[int, Any]:
        if email not in self.service_accounts:
            return 404, _error(404, "NOT_FOUND", f"Unknown service account {email}")
        return 200, {"email": email, "name": f"projects/{self.project}/serviceAccounts/{email}"}

    def _scheduler_job(self, name: str, query: Any, body: Any) -> tuple[int, Any]:
        if name not in self.scheduler_jobs:
            return 404, _error(404, "NOT_FOUND", f"Job not found: {name}")
        return 200, {"name": name, "schedule": "* * * * *", "state": "ENABLED"}

    def _assets(self, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        wanted = re.match(r'^labels\.([a-z0-9_-]+)=(?:"([^"]*)"|(\S+))$', query.get("query", [""])[0])
        value = wanted and (wanted.group(2) if wanted.group(2) is not None else wanted.group(3))
        results = [a for a in self.assets if wanted and a.get("labels", {}).get(wanted.group(1)) == value]
        return self._paged(results, query, "results", list)


def _error(status: int, reason: str, message: str) -> dict[str, Any]:
    upper = reason.isupper()
    return {
        "error": {
            "code": status,
            "message": message,
            **({"status": reason} if upper else {}),
            "errors": [{"reason": reason if not upper else "backendError", "message": message}],
        }
    }
