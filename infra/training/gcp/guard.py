"""What the GCP run guard is made of, as data (pure, no pulumi): the function's source files and settings, the
names of its resources, the tick schedule, the marker notification and the guard's permissions.
components/training/gcp/run_guard.py only wires these.

Checked against Google's documentation (2026-11): a Cloud Run function (Cloud Functions v2 API) reads `main.py`
at the source root; event-driven functions run at most 540 s; with RETRY_POLICY_RETRY Eventarc retries a failed
event for up to 7 days (backoff capped at 10 s), so the handler bounds its own retries; Cloud Storage
notifications filter by `object_name_prefix` and need the project's Cloud Storage service agent to hold
pubsub.topics.publish on the topic; a Cloud Scheduler job publishes to a topic of its own project with no grant;
cron's finest grain is a minute; IAM Conditions read resource.name for Compute Engine and Cloud Storage, not for
Managed Lustre, Pub/Sub or Cloud Run.
"""

from __future__ import annotations

from pathlib import Path

from infra.core.labels import account_id
from infra.core.project import ROOT
from infra.registry.layout import runs_prefix
from infra.training.gcp.plan import run_label, run_resource_prefix
from infra.training.limits import GCP_GUARD_TICK_SECONDS

SOURCE_DIR = ROOT / "run_guard_gcp"  # the function's package, deployed as-is
RUNTIME = "python312"
ENTRY_POINT = "guard"  # the function in run_guard_gcp/main.py
EVENT_TYPE = "google.cloud.pubsub.topic.v1.messagePublished"
RETRY_POLICY = "RETRY_POLICY_RETRY"  # the handler stops retrying a marker after RETRY_WINDOW_SECONDS
TIMEOUT_SECONDS = 300  # one step: a few API calls (each retried for about 30 s), far below the 540 s maximum
MEMORY = "256M"
TIME_ZONE = "Etc/UTC"
TICK_ATTRIBUTES = {"mlinfra-guard": "tick"}  # = run_guard_gcp.guard.TICK_ATTRIBUTE
MARKERS = ("_SUCCESS", "_FAILED")

# What cannot be scoped by an IAM condition (Managed Lustre and listing Compute Engine instances are checked on
# the project), in one custom role per run holding only what the guard calls. Deleting nodes is granted separately,
# with a condition on their names.
UNSCOPED_PERMISSIONS = (
    "compute.instances.list",
    "lustre.instances.delete",
    "lustre.instances.exportData",
    "lustre.instances.get",
    "lustre.instances.list",
    "lustre.operations.get",
    "lustre.operations.list",
)
NODE_ROLE = "roles/compute.instanceAdmin.v1"  # only on the run's nodes and their boot disks (condition)
REPORT_READER = "roles/storage.objectViewer"  # runs/<run-id>/ only: the markers and its own records
REPORT_WRITER = "roles/storage.objectCreator"  # runs/<run-id>/guard/ only: new objects, never overwrites
INVOKER = "roles/run.invoker"  # the trigger's identity on the function's own Cloud Run service
PUBLISHER = "roles/pubsub.publisher"  # the Cloud Storage service agent on the guard's topic only


def resource_name(run_id: str) -> str:
    """Function (and its Cloud Run service: at most 49 characters), topic and scheduler job: mlinfra-<run>-guard."""
    return f"{run_resource_prefix(run_id)}-guard"


def tick_job_name(run_id: str) -> str:
    return f"{resource_name(run_id)}-tick"


def service_account_id(run_id: str) -> str:
    return account_id("guard", run_id)


def source_object(run_id: str, file_name: str) -> str:
    """Where the function's source lies in the data bucket: runs/<run-id>/guard/source/<file> (beside the guard's
    reports; the notification's prefix runs/<run-id>/_ does not match it)."""
    return f"{runs_prefix(run_id)}guard/source/{file_name}"


def custom_role_id(run_id: str) -> str:
    """IAM role ids allow letters, digits, '_' and '.' (3-64 characters)."""
    return "mlinfraGuard_" + run_id.replace("-", "_")


def tick_schedule() -> str:
    """Every minute (cron's finest grain; the guard decides by expires-at, so the schedule needs no date)."""
    assert GCP_GUARD_TICK_SECONDS == 60, "a cron schedule ticks at whole minutes"
    return "* * * * *"


def marker_prefix(run_id: str) -> str:
    """The notification's object prefix: runs/<run-id>/_ (the markers and the claim; never the guard's own
    records under runs/<run-id>/guard/, nor another run's objects)."""
    return runs_prefix(run_id) + "_"


def node_condition(project: str, zone: str, run_id: str) -> str:
    """CEL: the run's nodes (<prefix>-node-<i>) and their boot disks (named after them), by resource.name."""
    prefix = f"{run_resource_prefix(run_id)}-node-"
    return " || ".join(
        f"resource.name.startsWith('projects/{project}/zones/{zone}/{kind}/{prefix}')"
        for kind in ("instances", "disks")
    )


def environment(
    project: str,
    run_id: str,
    bucket: str,
    lustre_instance: str,
    expires_at: str,
    teardown_on_completion: bool,
    export_checkpoints: bool,
) -> dict[str, str]:
    key, value = run_label(run_id)
    return {
        "MLINFRA_PROJECT": project,
        "MLINFRA_RUN_ID": run_id,
        "MLINFRA_DATA_BUCKET": bucket,
        "MLINFRA_LUSTRE_INSTANCE": lustre_instance,
        "MLINFRA_RUN_LABEL": f"{key}={value}",
        "MLINFRA_EXPIRES_AT": expires_at,
        "MLINFRA_TEARDOWN_ON_COMPLETION": str(teardown_on_completion).lower(),
        "MLINFRA_EXPORT_CHECKPOINTS": str(export_checkpoints).lower(),
    }


def source_files() -> dict[str, Path]:
    """Archive path -> file: main.py and requirements.txt at the root (Google's Python runtime reads them there),
    and the package itself."""
    files = {"main.py": SOURCE_DIR / "main.py", "requirements.txt": SOURCE_DIR / "requirements.txt"}
    files.update(
        {
            f"run_guard_gcp/{path.relative_to(SOURCE_DIR).as_posix()}": path
            for path in sorted(SOURCE_DIR.rglob("*.py"))
            if "__pycache__" not in path.parts
        }
    )
    return files
