"""The lifecycle commands on a GCP training stack: reap plans it like any other, teardown runs through the
real `GcpRunCloud` against the emulators (nodes deleted, checkpoints exported by Managed Lustre, destroy,
audit, stack removed), and the CLI builds the GCP adapter from the stack's config."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import requests

from infra.core.errors import InputError
from infra.core.project import load_project, stack_config
from infra.ops.lifecycle.gcp.cloud import GcpRunCloud
from infra.ops.lifecycle.reap import StackFacts, plan_reap
from infra.ops.lifecycle.teardown import AuditRetry, teardown
from run_guard_gcp.api import GcpApi
from tests.helpers import run_cli
from tests.infra.ops.lifecycle.gcp_world import BUCKET, LABEL, PROJECT, RUN, ZONE, put_object, seed_run
from tests.infra.ops.lifecycle.recording import FakeClock, RecordingStacks, StackState, World, printed, runtime

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
STACK = "training-gcp-test"


def test_reap_plans_gcp_stacks_by_expiry_like_aws_ones():
    decisions = plan_reap(
        [
            StackFacts("gcp-live", "training", deployed=True, expires_at_output="2026-03-01T13:00:00Z"),
            StackFacts("gcp-old", "training", deployed=True, expires_at_output="2026-03-01T11:00:00Z"),
        ],
        NOW,
    )
    assert [(d.stack, d.action) for d in decisions] == [("gcp-live", "keep"), ("gcp-old", "reap")]


def gcp_config() -> dict:
    return {
        "gcp:project": PROJECT,
        "gcp:region": "us-central1",
        "mlinfra:kind": "training",
        "mlinfra:cloud": "gcp",
        "mlinfra:training": {
            "runId": RUN,
            "machineType": "a3-highgpu-8g",
            "nodeCount": 2,
            "zone": ZONE,
            "dataBucket": BUCKET,
            "image": "projects/p/global/images/family/a3",
            "lifecycle": {"ttlHours": 24},
        },
    }


class EmulatedStacks(RecordingStacks):
    """The backend's record of a GCP stack; its destroy removes what `pulumi destroy` would from the emulator."""

    def __init__(self, world: World, emulator):
        super().__init__(world)
        self.emulator = emulator

    def destroy(self, stack, on_output):
        super().destroy(stack, on_output)
        self.emulator.instances.clear()
        self.emulator.disks.clear()
        self.emulator.file_systems.clear()
        for items in (*self.emulator.global_items.values(), *self.emulator.regional_items.values()):
            items.clear()


@pytest.fixture
def deployed(gcp):
    name = seed_run(gcp, nodes=2)
    gcp.add_global("networks", f"mlinfra-{RUN}-net")
    gcp.add_regional("resourcePolicies", "us-central1", f"mlinfra-{RUN}-compact")
    outputs = {"runId": RUN, "expiresAt": "2026-03-02T10:00:00Z", "dataBucket": BUCKET, "lustreInstanceId": name}
    world = World()
    world.stacks[STACK] = StackState(gcp_config(), outputs, resources=True)
    return world, EmulatedStacks(world, gcp)


def test_teardown_deletes_the_nodes_exports_then_destroys_audits_and_removes(gcp, gcp_cloud, deployed):
    world, stacks = deployed
    rt = runtime(FakeClock())
    assert teardown(STACK, stacks, gcp_cloud, rt, audit_retry=AuditRetry(pauses=())) == 0
    assert STACK not in world.stacks
    calls = [(method, path.rsplit("/", 1)[-1]) for method, path, _, _ in gcp.requests if method != "GET"]
    assert calls == [
        ("DELETE", f"mlinfra-{RUN}-node-0"),
        ("DELETE", f"mlinfra-{RUN}-node-1"),
        ("POST", f"mlinfra-{RUN}:exportData"),
    ]  # compute gone before the export starts
    export = next(iter(gcp.lustre_operations.values()))
    assert export["done"] and export["request"]["gcsPath"]["uri"] == f"gs://{BUCKET}/checkpoints/{RUN}/"
    lines = printed(rt)
    assert lines[0] == f"stack {STACK}: run {RUN}, bucket {BUCKET}"
    assert "compute: terminated 2 instance(s) of run " + RUN in lines
    assert any(line.startswith("checkpoints: exported to the registry (task projects/") for line in lines)
    assert lines[-2:] == [
        f"audit: nothing left with run id {RUN}",
        f"stack {STACK}: removed (its file in stacks/ is kept)",
    ]


def test_checkpoints_the_nodes_copied_themselves_need_no_export(gcp, gcp_cloud, deployed):
    world, stacks = deployed
    marker = b'{"exit_code": 0, "checkpoints_exported": true, "expires_at": 1772445600}'  # this deployment's
    put_object(gcp.storage, f"runs/{RUN}/_SUCCESS", marker)
    assert teardown(STACK, stacks, gcp_cloud, runtime(FakeClock()), audit_retry=AuditRetry(pauses=())) == 0
    assert not [m for m, *_ in gcp.requests if m == "POST"]


def test_a_failed_export_keeps_everything_but_the_nodes(gcp, gcp_cloud, deployed):
    world, stacks = deployed
    gcp.export.outcomes, gcp.export.polls = ["failed"], 1
    rt = runtime(FakeClock())
    assert teardown(STACK, stacks, gcp_cloud, rt) == 1
    assert "destroy" not in world.names() and STACK in world.stacks and gcp.file_systems
    assert printed(rt)[-1].startswith("checkpoints: export failed (task projects/")


def test_leftovers_after_destroy_keep_the_stack(gcp, gcp_cloud, deployed):
    world, stacks = deployed
    gcp.assets.append(
        {
            "name": f"//storage.googleapis.com/projects/_/buckets/mlinfra-{RUN}-tmp",
            "assetType": "storage.googleapis.com/Bucket",
            "labels": {LABEL: RUN},
        }
    )
    rt = runtime(FakeClock())
    assert teardown(STACK, stacks, gcp_cloud, rt, audit_retry=AuditRetry(pauses=(60,))) == 1
    assert STACK in world.stacks
    assert printed(rt)[-1].endswith("(found by asset-inventory)")


def test_the_cli_builds_the_gcp_adapter_from_the_stack_config():
    from infra.ops.lifecycle.cli import run_cloud

    built = run_cloud(gcp_config())
    assert isinstance(built, GcpRunCloud) and (built.project, built.data_bucket) == (PROJECT, BUCKET)
    assert built.lustre_instances == (f"projects/{PROJECT}/locations/{ZONE}/instances/mlinfra-{RUN}",)
    del (config := gcp_config())["mlinfra:training"]["dataBucket"]
    with pytest.raises(InputError, match="dataBucket"):
        run_cloud(config)


def test_audit_cli_on_gcp_against_the_emulators(gcp):
    env = {"MLINFRA_GCP_API_ENDPOINT": gcp.base, "STORAGE_EMULATOR_HOST": gcp.storage}
    clean = run_cli("audit", "--cloud", "gcp", "--project", PROJECT, "--run-id", RUN, env=env)
    assert clean.returncode == 0, clean.stderr
    assert clean.stdout.strip() == f"run {RUN} in {PROJECT}: nothing left: no resource carries the run's label"
    seed_run(gcp, nodes=1)
    left = run_cli("audit", "--cloud", "gcp", "--project", PROJECT, "--run-id", RUN, "--json", env=env)
    assert left.returncode == 1
    assert '"project": "mlinfra-test"' in left.stdout and "compute:instance" in left.stdout


@pytest.mark.parametrize(
    "args, words",
    [
        (("--cloud", "gcp", "--run-id", RUN), "--project: required with --cloud gcp"),
        (
            ("--cloud", "gcp", "--project", PROJECT, "--region", "us-east-1", "--run-id", RUN),
            "--region: only with --cloud aws",
        ),
        (("--project", PROJECT, "--run-id", RUN), "--project: only with --cloud gcp"),
        (("--cloud", "gcp", "--project", PROJECT, "--run-id", "Bad_Id"), "--run-id: 'Bad_Id' is not a run id"),
    ],
)
def test_audit_flags_that_do_not_fit_exit_2(args, words):
    done = run_cli("audit", *args, env={"GOOGLE_CLOUD_PROJECT": ""})
    assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr


def test_run_on_gcp_deploys_watches_the_nodes_and_tears_down_on_the_marker(gcp, gcp_cloud):
    """`run training-gcp-demo`: the marker is read from the data bucket, the nodes counted by label and priced
    from the GCP catalog, and the teardown deletes them (the marker says the nodes copied the checkpoints)."""
    from infra.ops.lifecycle.run import run
    from tests.infra.ops.lifecycle.recording import run_world

    stack = "training-gcp-demo"
    name = f"projects/{PROJECT}/locations/{ZONE}/instances/mlinfra-{RUN}"
    world = run_world(
        deploy_outputs={
            "runId": RUN,
            "expiresAt": "2026-03-02T10:00:00Z",
            "dataBucket": BUCKET,
            "lustreInstanceId": name,
        }
    )
    stacks = EmulatedStacks(world, gcp)
    clock = FakeClock()
    slept = []
    # The stack file's data bucket, where `run` checks for an earlier marker and claims the run id.
    data_bucket = stack_config(load_project(), stack)["mlinfra:training"]["dataBucket"]
    made = requests.post(f"{gcp.storage}/storage/v1/b", params={"project": PROJECT}, json={"name": data_bucket})
    assert made.status_code in (200, 409), made.text

    def sleep(seconds):  # the nodes come up at the first poll, run for an hour, then the job writes its marker
        clock.sleep(seconds)
        slept.append(seconds)
        if len(slept) == 1:
            seed_run(gcp, nodes=2)
        if sum(slept) == 3600:
            put_object(gcp.storage, f"runs/{RUN}/_SUCCESS", b'{"exit_code": 0, "checkpoints_exported": true}')

    rt = runtime(clock)
    rt = type(rt)(now=clock.now, sleep=sleep, stream=rt.stream)
    code = run(stack, stacks, gcp_cloud, rt, preview_fn=lambda *a: type("Clean", (), {"errors": []})())
    lines = printed(rt)
    assert code == 0, lines
    assert world.calls[:3] == [
        ("exists", stack),
        ("set_config", stack, "mlinfra:training.lifecycle.expiresAt", "2026-03-02T10:00:00Z"),
        ("up", stack),
    ]
    claimed_id = stack_config(load_project(), stack)["mlinfra:training"]["runId"]  # the stack file's run id
    raw = GcpApi(requests.Session(), gcp.endpoints).object_media(data_bucket, f"runs/{claimed_id}/_CLAIM")
    claim = json.loads(raw or b"")
    assert claim["stack"] == f"mlinfra/{stack}"  # claimed in the data bucket before the deploy
    assert f"up: deployed run {RUN} (2 x a3-highgpu-8g), expires-at 2026-03-02T10:00:00Z" in lines
    assert lines[-1].startswith(f"run {RUN}: job succeeded; 1h 0") and "at the on-demand list price" in lines[-1]
    assert gcp.instances == {} and stack not in world.stacks


def test_teardown_after_the_guard_deleted_the_file_system_goes_on(gcp, gcp_cloud, deployed):
    """The guard exported and deleted the file system at expires-at; the stack's outputs still name it. Its record
    says why it is gone, so the teardown destroys the rest instead of stopping on a "missing" file system."""
    world, stacks = deployed
    name = world.stacks[STACK].outputs["lustreInstanceId"]
    done = {"file_system": name, "file_system_deletion": "deleting", "outcome": "checkpoints exported"}
    put_object(gcp.storage, f"runs/{RUN}/guard/done.json", json.dumps(done).encode())
    gcp.file_systems.clear()
    rt = runtime(FakeClock())
    assert teardown(STACK, stacks, gcp_cloud, rt, audit_retry=AuditRetry(pauses=())) == 0
    assert STACK not in world.stacks
    assert "checkpoints: no file system left to export from" in printed(rt)


def test_without_the_guards_record_a_missing_file_system_stops_the_teardown(gcp, gcp_cloud, deployed):
    world, stacks = deployed
    gcp.file_systems.clear()
    rt = runtime(FakeClock())
    assert teardown(STACK, stacks, gcp_cloud, rt) == 1
    assert STACK in world.stacks and "destroy" not in world.names()


def test_the_audit_lists_the_guards_account_and_tick_job(gcp):
    from infra.ops.lifecycle.gcp.cloud import GcpRunCloud

    cloud = GcpRunCloud(PROJECT, BUCKET, api=GcpApi(requests.Session(), gcp.endpoints), region="us-central1")
    gcp.service_accounts.add(f"guard-{RUN}@{PROJECT}.iam.gserviceaccount.com")
    job = f"projects/{PROJECT}/locations/us-central1/jobs/mlinfra-{RUN}-guard-tick"
    gcp.scheduler_jobs.add(job)
    found = {(leftover.kind, leftover.identifier) for leftover in cloud.audit(RUN)}
    assert found == {
        ("iam:service-account", f"guard-{RUN}@{PROJECT}.iam.gserviceaccount.com"),
        ("cloudscheduler:job", job),
    }
