"""Start the moto server on 127.0.0.1 for the lifecycle tests: `python moto_launcher.py`.

Prints `READY <port>` once it listens (port chosen by the OS) and serves until SIGTERM/SIGINT or
until its stdin closes (so it never outlives the test session that started it).

Emulator extension: moto 5.2.5 has no FSx data repository tasks, so this adds
CreateDataRepositoryTask and DescribeDataRepositoryTasks to moto's FSx backend, following the real
API's shapes and errors (FileSystemNotFound, DataRepositoryTaskExecuting while one is PENDING or
EXECUTING, DataRepositoryTaskNotFound). A new task stays PENDING until a test moves it with
    POST /moto-api/fsx/data-repository-task  {"TaskId": "...", "Lifecycle": "EXECUTING" | "SUCCEEDED"
                                              | "FAILED" | "CANCELED", "FailureMessage": "..."}
standing in for the real service finishing (or failing) the export. Nothing here knows mlinfra's code.
"""
from __future__ import annotations

import json
import signal
import sys
import threading
import time
from typing import Any
from uuid import uuid4

from moto.core.exceptions import JsonRESTError
from moto.fsx.exceptions import FileSystemNotFound
from moto.fsx.models import FSxBackend, fsx_backends
from moto.fsx.responses import FSxResponse
from moto.moto_api._internal import urls as moto_api_urls
from moto.server import ThreadedMotoServer

RUNNING = ("PENDING", "EXECUTING")
SETTABLE = ("EXECUTING", "SUCCEEDED", "FAILED", "CANCELED")


def _tasks(backend: FSxBackend) -> dict[str, dict[str, Any]]:
    if not hasattr(backend, "mlinfra_tasks"):
        backend.mlinfra_tasks = {}  # type: ignore[attr-defined]
    return backend.mlinfra_tasks  # type: ignore[attr-defined]


def create_data_repository_task(self: FSxResponse) -> str:
    params = json.loads(self.body)
    backend = fsx_backends[self.current_account][self.region]
    fs_id = params["FileSystemId"]
    if fs_id not in backend.file_systems:
        raise FileSystemNotFound(fs_id)
    tasks = _tasks(backend)
    if any(t["FileSystemId"] == fs_id and t["Lifecycle"] in RUNNING for t in tasks.values()):
        raise JsonRESTError("DataRepositoryTaskExecuting",
                            "An existing data repository task is currently executing on the file system.")
    task_id = f"task-{uuid4().hex[:17]}"
    arn = f"arn:aws:fsx:{self.region}:{self.current_account}:task/{task_id}"
    if params.get("Tags"):
        backend.tagger.tag_resource(arn, params["Tags"])
    task = {"TaskId": task_id, "Lifecycle": "PENDING", "Type": params["Type"], "CreationTime": time.time(),
            "ResourceARN": arn, "Tags": params.get("Tags", []), "FileSystemId": fs_id,
            "Paths": params.get("Paths", []), "Report": params["Report"]}
    tasks[task_id] = task
    return json.dumps({"DataRepositoryTask": task})


def describe_data_repository_tasks(self: FSxResponse) -> str:
    params = json.loads(self.body)
    tasks = list(_tasks(fsx_backends[self.current_account][self.region]).values())
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


def set_task_lifecycle(request: Any, full_url: str, headers: Any) -> tuple[int, dict, str]:
    """Admin endpoint: move a task to another lifecycle state, as the real service would."""
    body = json.loads(request.get_data() or b"{}")
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


def install_extensions() -> None:
    FSxResponse.create_data_repository_task = create_data_repository_task  # type: ignore[attr-defined]
    FSxResponse.describe_data_repository_tasks = describe_data_repository_tasks  # type: ignore[attr-defined]
    moto_api_urls.url_paths["{0}/moto-api/fsx/data-repository-task"] = set_task_lifecycle


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
