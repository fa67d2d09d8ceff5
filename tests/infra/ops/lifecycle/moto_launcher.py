"""Start the moto server on 127.0.0.1 for the lifecycle tests: `python moto_launcher.py`.

Prints `READY <port>` once it listens (port chosen by the OS) and serves until SIGTERM/SIGINT or
until its stdin closes (so it never outlives the test session that started it).

Emulator extensions, following the real APIs' shapes and documented errors (nothing here knows
mlinfra's code):
- FSx data repository tasks (moto 5.2.5 has none): CreateDataRepositoryTask, DescribeDataRepositoryTasks;
  DataRepositoryTaskExecuting while one is PENDING or EXECUTING; a task needs a linked repository,
  and an enabled completion report a Path inside one (BadRequest otherwise). A new task stays PENDING
  until a test moves it, standing in for the service finishing (or failing) the export:
    POST /moto-api/fsx/data-repository-task  {"TaskId", "Lifecycle": EXECUTING|SUCCEEDED|FAILED|CANCELED,
                                              "FailureMessage"}
- FSx data repository associations: CreateDataRepositoryAssociation, DescribeDataRepositoryAssociations,
  UpdateDataRepositoryAssociation (S3 policies); an export task is refused while an association it
  exports through has automatic export on ("Automatic export and export data repository tasks cannot
  run at the same time", FSx Lustre guide; DeleteFileSystem API).
- FSx file systems carry Lifecycle (AVAILABLE) and a DeploymentType (SCRATCH_1 unless given), and
  deletion is staged as in FSx: DeleteFileSystem leaves the file system DELETING (listed) until
    POST /moto-api/fsx/file-system  {"FileSystemId", "Lifecycle": "DELETED" | any FileSystemLifecycle}
  DeleteFileSystem refuses (BadRequest) a LustreConfiguration for SCRATCH_1/SCRATCH_2, a file system
  already DELETING, and one with a PENDING/EXECUTING data repository task.
- The Resource Groups Tagging API also lists FSx tasks and associations.
- Service Quotas applied values (moto_quotas.py).
- Faults: the next `Count` calls of an action answer with an AWS error instead
    POST /moto-api/mlinfra/faults  {"Faults": [{"Action": "DescribeInstances", "Code": "RequestLimitExceeded",
                                                "Status": 503, "Count": 2}]}   (replaces the list; [] clears)
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from io import BytesIO
from typing import Any
from urllib.parse import parse_qs
from uuid import uuid4

import moto_quotas  # a sibling: this file runs as a script, so its folder is on the path
from moto.core.exceptions import JsonRESTError
from moto.core.resource_tagging import TaggedResource
from moto.fsx.exceptions import FileSystemNotFound
from moto.fsx.models import FileSystem, FSxBackend, fsx_backends
from moto.fsx.responses import FSxResponse
from moto.moto_api._internal import urls as moto_api_urls
from moto.moto_server import threaded_moto_server
from moto.server import ThreadedMotoServer

RUNNING = ("PENDING", "EXECUTING")
SETTABLE = ("EXECUTING", "SUCCEEDED", "FAILED", "CANCELED")
FS_LIFECYCLES = (
    "AVAILABLE",
    "CREATING",
    "FAILED",
    "DELETING",
    "MISCONFIGURED",
    "UPDATING",
    "MISCONFIGURED_UNAVAILABLE",
    "DELETED",
)


class BadRequest(JsonRESTError):
    def __init__(self, message: str):
        super().__init__("BadRequest", message)


def _state(backend: FSxBackend, name: str) -> dict[str, Any]:
    if not hasattr(backend, f"mlinfra_{name}"):
        setattr(backend, f"mlinfra_{name}", {})
    return getattr(backend, f"mlinfra_{name}")


def _tasks(backend: FSxBackend) -> dict[str, dict[str, Any]]:
    return _state(backend, "tasks")


def _associations(backend: FSxBackend) -> dict[str, dict[str, Any]]:
    return _state(backend, "associations")


def _backend(response: FSxResponse) -> FSxBackend:
    return fsx_backends[response.current_account][response.region]


def _file_system(backend: FSxBackend, fs_id: str) -> FileSystem:
    if fs_id not in backend.file_systems:
        raise FileSystemNotFound(fs_id)
    return backend.file_systems[fs_id]


def _lifecycle(fs: FileSystem) -> str:
    return getattr(fs, "mlinfra_lifecycle", "AVAILABLE")


def _deployment_type(fs: FileSystem) -> str:
    return (fs.lustre_configuration or {}).get("DeploymentType", "SCRATCH_1")


def _repositories(backend: FSxBackend, fs: FileSystem) -> list[str]:
    """The S3 paths linked to the file system: its associations' and a legacy ExportPath."""
    paths = [a["DataRepositoryPath"] for a in _associations(backend).values() if a["FileSystemId"] == fs.file_system_id]
    legacy = (fs.lustre_configuration or {}).get("ExportPath") or (
        (fs.lustre_configuration or {}).get("DataRepositoryConfiguration") or {}
    ).get("ExportPath")
    return paths + ([legacy] if legacy else [])


def _within(path: str, repository: str) -> bool:
    return path.rstrip("/") == repository.rstrip("/") or path.startswith(repository.rstrip("/") + "/")


_original_to_dict = FileSystem.to_dict


def file_system_to_dict(self: FileSystem) -> dict[str, Any]:
    described = _original_to_dict(self)
    described["Lifecycle"] = _lifecycle(self)
    if self.file_system_type == "LUSTRE":
        described["LustreConfiguration"] = {"DeploymentType": "SCRATCH_1", **(self.lustre_configuration or {})}
    return described


def delete_file_system(self: FSxResponse) -> str:
    params = json.loads(self.body)
    backend = _backend(self)
    fs = _file_system(backend, params["FileSystemId"])
    if _lifecycle(fs) == "DELETING":
        raise BadRequest(f"File system {fs.file_system_id} is already being deleted.")
    if (
        fs.file_system_type == "LUSTRE"
        and "LustreConfiguration" in params
        and _deployment_type(fs).startswith("SCRATCH")
    ):
        raise BadRequest(f"LustreConfiguration cannot be specified when deleting a {_deployment_type(fs)} file system.")
    if any(t["FileSystemId"] == fs.file_system_id and t["Lifecycle"] in RUNNING for t in _tasks(backend).values()):
        raise BadRequest("Cannot delete a file system while a data repository task is PENDING or EXECUTING.")
    _set_file_system_lifecycle(backend, fs, "DELETING")
    answer: dict[str, Any] = {"FileSystemId": fs.file_system_id, "Lifecycle": "DELETING"}
    if fs.file_system_type == "LUSTRE":
        answer["LustreResponse"] = {}
    return json.dumps(answer)


def _set_file_system_lifecycle(backend: FSxBackend, fs: FileSystem, lifecycle: str) -> None:
    associations = [a for a in _associations(backend).values() if a["FileSystemId"] == fs.file_system_id]
    if lifecycle == "DELETED":
        backend.file_systems.pop(fs.file_system_id, None)
        for association in associations:
            _associations(backend).pop(association["AssociationId"], None)
        return
    fs.mlinfra_lifecycle = lifecycle  # type: ignore[attr-defined]
    if lifecycle == "DELETING":
        for association in associations:
            association["Lifecycle"] = "DELETING"


def create_data_repository_association(self: FSxResponse) -> str:
    params = json.loads(self.body)
    backend = _backend(self)
    fs = _file_system(backend, params["FileSystemId"])
    if _deployment_type(fs) == "SCRATCH_1":
        raise BadRequest("Data repository associations are not supported on SCRATCH_1 file systems.")
    association_id = f"dra-{uuid4().hex[:17]}"
    arn = f"arn:aws:fsx:{self.region}:{self.current_account}:association/{fs.file_system_id}/{association_id}"
    if params.get("Tags"):
        backend.tagger.tag_resource(arn, params["Tags"])
    association = {
        "AssociationId": association_id,
        "ResourceARN": arn,
        "FileSystemId": fs.file_system_id,
        "Lifecycle": "AVAILABLE",
        "FileSystemPath": params.get("FileSystemPath", "/"),
        "DataRepositoryPath": params["DataRepositoryPath"],
        "BatchImportMetaDataOnCreate": params.get("BatchImportMetaDataOnCreate", False),
        "ImportedFileChunkSize": params.get("ImportedFileChunkSize", 1024),
        "S3": params.get("S3", {}),
        "Tags": params.get("Tags", []),
        "CreationTime": time.time(),
    }
    _associations(backend)[association_id] = association
    return json.dumps({"Association": association})


def describe_data_repository_associations(self: FSxResponse) -> str:
    params = json.loads(self.body)
    associations = list(_associations(_backend(self)).values())
    if params.get("AssociationIds"):
        known = {a["AssociationId"] for a in associations}
        missing = [i for i in params["AssociationIds"] if i not in known]
        if missing:
            raise JsonRESTError(
                "DataRepositoryAssociationNotFound", f"Data repository association {missing[0]} not found."
            )
        associations = [a for a in associations if a["AssociationId"] in params["AssociationIds"]]
    for flt in params.get("Filters", []):
        if flt["Name"] == "file-system-id":
            associations = [a for a in associations if a["FileSystemId"] in flt["Values"]]
    return json.dumps({"Associations": associations})


def update_data_repository_association(self: FSxResponse) -> str:
    params = json.loads(self.body)
    association = _associations(_backend(self)).get(params["AssociationId"])
    if association is None:
        raise JsonRESTError(
            "DataRepositoryAssociationNotFound", f"Data repository association {params['AssociationId']} not found."
        )
    if "S3" in params:
        association["S3"] = params["S3"]
    for key in ("ImportedFileChunkSize",):
        if key in params:
            association[key] = params[key]
    return json.dumps({"Association": association})


def _auto_exporting(backend: FSxBackend, fs: FileSystem, paths: list[str]) -> list[str]:
    """Associations of `fs` with automatic export on that an export of `paths` would go through."""
    wanted = ["/" + p.strip("/") for p in paths] or ["/"]
    found = []
    for association in _associations(backend).values():
        linked = "/" + association["FileSystemPath"].strip("/")
        covers = any(
            w == linked or w.startswith(linked.rstrip("/") + "/") or linked.startswith(w.rstrip("/") + "/") or w == "/"
            for w in wanted
        )
        if (
            association["FileSystemId"] == fs.file_system_id
            and covers
            and ((association.get("S3") or {}).get("AutoExportPolicy") or {}).get("Events")
        ):
            found.append(association["AssociationId"])
    return found


def create_data_repository_task(self: FSxResponse) -> str:
    params = json.loads(self.body)
    backend = _backend(self)
    fs = _file_system(backend, params["FileSystemId"])
    if _lifecycle(fs) != "AVAILABLE":
        raise BadRequest(f"File system {fs.file_system_id} is {_lifecycle(fs)}, not AVAILABLE.")
    repositories = _repositories(backend, fs)
    if not repositories:
        raise BadRequest(f"File system {fs.file_system_id} is not linked to a data repository.")
    exporting = (
        _auto_exporting(backend, fs, params.get("Paths", [])) if params["Type"] == "EXPORT_TO_REPOSITORY" else []
    )
    if exporting:
        raise BadRequest(
            f"Automatic export is enabled on {', '.join(exporting)}; disable it before running an "
            "export data repository task."
        )
    report = params["Report"]
    if report.get("Enabled"):
        missing = [name for name in ("Path", "Format", "Scope") if not report.get(name)]
        if missing:
            raise BadRequest(f"Report {', '.join(missing)} must be set when the report is enabled.")
        if not any(_within(report["Path"], repository) for repository in repositories):
            raise BadRequest(f"Report path {report['Path']} is not within a linked data repository path.")
    tasks = _tasks(backend)
    if any(t["FileSystemId"] == fs.file_system_id and t["Lifecycle"] in RUNNING for t in tasks.values()):
        raise JsonRESTError(
            "DataRepositoryTaskExecuting", "An existing data repository task is currently executing on the file system."
        )
    task_id = f"task-{uuid4().hex[:17]}"
    arn = f"arn:aws:fsx:{self.region}:{self.current_account}:task/{task_id}"
    if params.get("Tags"):
        backend.tagger.tag_resource(arn, params["Tags"])
    task = {
        "TaskId": task_id,
        "Lifecycle": "PENDING",
        "Type": params["Type"],
        "CreationTime": time.time(),
        "ResourceARN": arn,
        "Tags": params.get("Tags", []),
        "FileSystemId": fs.file_system_id,
        "Paths": params.get("Paths", []),
        "Report": report,
    }
    tasks[task_id] = task
    return json.dumps({"DataRepositoryTask": task})


def describe_data_repository_tasks(self: FSxResponse) -> str:
    params = json.loads(self.body)
    tasks = list(_tasks(_backend(self)).values())
    if params.get("TaskIds"):
        missing = [i for i in params["TaskIds"] if i not in {t["TaskId"] for t in tasks}]
        if missing:
            raise JsonRESTError("DataRepositoryTaskNotFound", f"Data repository task {missing[0]} not found.")
        tasks = [t for t in tasks if t["TaskId"] in params["TaskIds"]]
    fields = {"file-system-id": "FileSystemId", "task-lifecycle": "Lifecycle"}
    for flt in params.get("Filters", []):
        if flt["Name"] in fields:
            tasks = [t for t in tasks if t[fields[flt["Name"]]] in flt["Values"]]
    start = int(params.get("NextToken") or 0)
    end = start + int(params.get("MaxResults") or 100)
    page = {"DataRepositoryTasks": tasks[start:end]}
    if end < len(tasks):
        page["NextToken"] = str(end)
    return json.dumps(page)


_original_tagged = FSxBackend.iter_tagged_resources


def iter_tagged_resources(self: FSxBackend) -> Iterator[TaggedResource]:
    yield from _original_tagged(self)
    for kind, items in (("fsx:task", _tasks(self)), ("fsx:association", _associations(self))):
        for item in items.values():
            yield TaggedResource(
                arn=item["ResourceARN"],
                resource_type=kind,
                tags=self.tagger.get_tag_dict_for_resource(item["ResourceARN"]),
            )


def _json_body(request: Any) -> dict[str, Any]:
    return json.loads(request.get_data() or b"{}")


def set_task_lifecycle(request: Any, full_url: str, headers: Any) -> tuple[int, dict, str]:
    """Admin endpoint: move a task to another lifecycle state, as the real service would."""
    body = _json_body(request)
    if body.get("Lifecycle") not in SETTABLE:
        return 400, {}, json.dumps({"error": f"Lifecycle must be one of {SETTABLE}"})
    for backend in (b for regions in fsx_backends.values() for b in regions.values()):
        task = _tasks(backend).get(body.get("TaskId"))
        if task:
            now = time.time()
            task["Lifecycle"] = body["Lifecycle"]
            task.setdefault("StartTime", now)
            if body["Lifecycle"] != "EXECUTING":
                task["EndTime"] = now
            if body.get("FailureMessage"):
                task["FailureDetails"] = {"Message": body["FailureMessage"]}
            return 200, {}, json.dumps(task)
    return 404, {}, json.dumps({"error": f"no data repository task {body.get('TaskId')!r}"})


def set_file_system_lifecycle(request: Any, full_url: str, headers: Any) -> tuple[int, dict, str]:
    """Admin endpoint: move a file system on (DELETING -> DELETED finishes a deletion)."""
    body = _json_body(request)
    if body.get("Lifecycle") not in FS_LIFECYCLES:
        return 400, {}, json.dumps({"error": f"Lifecycle must be one of {FS_LIFECYCLES}"})
    for backend in (b for regions in fsx_backends.values() for b in regions.values()):
        fs = backend.file_systems.get(body.get("FileSystemId"))
        if fs:
            _set_file_system_lifecycle(backend, fs, body["Lifecycle"])
            return 200, {}, json.dumps({"FileSystemId": fs.file_system_id, "Lifecycle": body["Lifecycle"]})
    return 404, {}, json.dumps({"error": f"no file system {body.get('FileSystemId')!r}"})


def set_association_lifecycle(request: Any, full_url: str, headers: Any) -> tuple[int, dict, str]:
    """Admin endpoint: put an association in a lifecycle state (UPDATING while FSx applies a change;
    the emulator applies updates at once otherwise)."""
    body = _json_body(request)
    for backend in (b for regions in fsx_backends.values() for b in regions.values()):
        association = _associations(backend).get(body.get("AssociationId"))
        if association:
            association["Lifecycle"] = body.get("Lifecycle", "AVAILABLE")
            return 200, {}, json.dumps(association)
    return 404, {}, json.dumps({"error": f"no association {body.get('AssociationId')!r}"})


# --- fault injection -----------------------------------------------------------------------------

FAULTS: list[dict[str, Any]] = []
FAULTS_LOCK = threading.Lock()


def set_faults(request: Any, full_url: str, headers: Any) -> tuple[int, dict, str]:
    faults = _json_body(request).get("Faults", [])
    with FAULTS_LOCK:
        FAULTS[:] = [
            {
                "Action": f["Action"],
                "Code": f["Code"],
                "Status": int(f.get("Status", 400)),
                "Count": int(f.get("Count", 1)),
                "Message": f.get("Message", f"{f['Code']} (injected)"),
            }
            for f in faults
        ]
    return 200, {}, json.dumps({"Faults": FAULTS})


def _action(environ: dict[str, Any]) -> tuple[str | None, bool]:
    """The AWS action a request calls and whether it speaks JSON (X-Amz-Target) or the query protocol."""
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        return target.rsplit(".", 1)[-1], True
    if environ.get("CONTENT_TYPE", "").startswith("application/x-www-form-urlencoded"):
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = BytesIO(body)
        return (parse_qs(body.decode(errors="replace")).get("Action") or [None])[0], False
    return None, False


def _fault_for(environ: dict[str, Any]) -> tuple[dict[str, Any], bool] | None:
    if not FAULTS or environ.get("PATH_INFO", "").startswith("/moto-api"):
        return None
    action, is_json = _action(environ)
    with FAULTS_LOCK:
        for fault in FAULTS:
            if fault["Action"] == action and fault["Count"] > 0:
                fault["Count"] -= 1
                return dict(fault), is_json
    return None


class FaultyDispatcher(threaded_moto_server.DomainDispatcherApplication):  # type: ignore[misc,name-defined]
    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        found = _fault_for(environ)
        if found is None:
            return super().__call__(environ, start_response)
        fault, is_json = found
        if is_json:
            body = json.dumps({"__type": fault["Code"], "message": fault["Message"]}).encode()
            content_type = "application/x-amz-json-1.1"
        else:
            body = (
                f'<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>{fault["Code"]}</Code>'
                f"<Message>{fault['Message']}</Message></Error></Errors><RequestID>{uuid4()}</RequestID>"
                "</Response>"
            ).encode()
            content_type = "text/xml"
        start_response(
            f"{fault['Status']} Injected", [("Content-Type", content_type), ("Content-Length", str(len(body)))]
        )
        return [body]


def install_extensions() -> None:
    FileSystem.to_dict = file_system_to_dict  # type: ignore[method-assign]
    FSxBackend.iter_tagged_resources = iter_tagged_resources  # type: ignore[method-assign]
    FSxResponse.delete_file_system = delete_file_system  # type: ignore[method-assign]
    FSxResponse.create_data_repository_association = create_data_repository_association  # type: ignore[attr-defined]
    FSxResponse.describe_data_repository_associations = (  # type: ignore[attr-defined]
        describe_data_repository_associations
    )
    FSxResponse.update_data_repository_association = (  # type: ignore[attr-defined]
        update_data_repository_association
    )
    FSxResponse.create_data_repository_task = create_data_repository_task  # type: ignore[attr-defined]
    FSxResponse.describe_data_repository_tasks = describe_data_repository_tasks  # type: ignore[attr-defined]
    moto_api_urls.url_paths["{0}/moto-api/fsx/data-repository-task"] = set_task_lifecycle
    moto_api_urls.url_paths["{0}/moto-api/fsx/file-system"] = set_file_system_lifecycle
    moto_api_urls.url_paths["{0}/moto-api/fsx/association"] = set_association_lifecycle
    moto_api_urls.url_paths["{0}/moto-api/mlinfra/faults"] = set_faults
    moto_quotas.install(moto_api_urls.url_paths)
    threaded_moto_server.DomainDispatcherApplication = FaultyDispatcher  # the server builds its app from this name


def main() -> int:
    from moto.core.config import default_user_config

    default_user_config["lambda"] = {"use_docker": False}  # Invoke answers without running the code
    install_extensions()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    print(f"READY {server.get_host_and_port()[1]}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
