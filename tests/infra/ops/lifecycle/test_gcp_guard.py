"""The GCP run guard (run_guard_gcp), called in-process as its handler against the emulators: gcp-storage-emulator
for the bucket, ours for Compute Engine and Managed Lustre (tests/infra/ops/lifecycle/gcp_emulator.py)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from run_guard_gcp.config import ConfigError, load_config
from run_guard_gcp.guard import DONE, EXPORT, STOPPED
from run_guard_gcp.handler import handle_event
from tests.infra.ops.lifecycle.gcp_guard_world import (
    BEFORE,
    EXPIRY,
    INSTANCE,
    guard_api,
    guard_env,
    guard_object,
    guard_objects,
    object_event,
    tick,
)
from tests.infra.ops.lifecycle.gcp_world import BUCKET, OTHER, PROJECT, RUN, ZONE, put_object, seed_run

GUARD = f"runs/{RUN}/guard/"


def changes(gcp) -> list[tuple[str, str]]:
    """(method, last path segment) of every change the cloud accepted, in order (a DELETE of a node already on its
    way out is refused with resourceNotReady, and is not one)."""
    return [(method, path.rsplit("/", 1)[-1]) for method, path in gcp.accepted]


def run(gcp, event, at, **env):
    return handle_event(event, guard_env(**env), guard_api(gcp), now=lambda: at)


def ticks(gcp, start, count):
    return [run(gcp, tick(start + timedelta(minutes=i)), start + timedelta(minutes=i)) for i in range(count)]


def test_completion_deletes_the_nodes_then_exports_then_deletes_the_file_system(gcp):
    seed_run(gcp, nodes=2)
    put_object(gcp.storage, f"runs/{RUN}/_SUCCESS", b'{"exit_code": 0, "checkpoints_exported": false}')
    first = run(gcp, object_event(f"runs/{RUN}/_SUCCESS", BEFORE), BEFORE)
    assert (first["action"], first["deleted"]) == ("completion", [f"mlinfra-{RUN}-node-0", f"mlinfra-{RUN}-node-1"])
    results = ticks(gcp, BEFORE + timedelta(minutes=1), 6)
    assert changes(gcp) == [
        ("DELETE", f"mlinfra-{RUN}-node-0"),
        ("DELETE", f"mlinfra-{RUN}-node-1"),
        ("POST", f"mlinfra-{RUN}:exportData"),  # once no node is left
        ("DELETE", f"mlinfra-{RUN}"),  # the file system, once the export succeeded
    ]
    assert guard_objects(gcp) == [
        GUARD + "20260302T080000.000000Z-completion.json",  # the nodes' deletion asked
        GUARD + "20260302T080200.000000Z-completion.json",  # the export started
        GUARD + "20260302T080400.000000Z-completion.json",  # the file system's deletion asked
        GUARD + DONE,
        GUARD + EXPORT,
        GUARD + STOPPED,
    ]
    export = next(op for op in gcp.lustre_operations.values() if "request" in op)
    assert export["request"]["gcsPath"] == {"uri": f"gs://{BUCKET}/checkpoints/{RUN}/"}
    assert export["request"]["lustrePath"] == {"path": "/checkpoints"}
    done = guard_object(gcp, GUARD + DONE)
    assert done["outcome"] == "compute stopped; checkpoints exported; file system deleting"
    assert done["export"]["state"] == "succeeded" and gcp.file_systems[INSTANCE]["state"] == "DELETING"
    assert results[-1]["outcome"].startswith("nothing to do: done earlier")
    assert guard_object(gcp, GUARD + STOPPED)["action"] == "completion"
    assert guard_object(gcp, GUARD + EXPORT)["operation"] == export["name"]


def test_a_failed_export_keeps_the_file_system_and_says_so(gcp):
    seed_run(gcp, nodes=1)
    gcp.export.outcomes, gcp.export.polls = ["failed"], 1
    put_object(gcp.storage, f"runs/{RUN}/_FAILED", b'{"exit_code": 3}')
    run(gcp, object_event(f"runs/{RUN}/_FAILED", BEFORE), BEFORE)
    ticks(gcp, BEFORE + timedelta(minutes=1), 8)
    assert gcp.file_systems[INSTANCE]["state"] == "ACTIVE"
    assert not [c for c in changes(gcp) if c == ("DELETE", f"mlinfra-{RUN}")]
    assert [c for c in changes(gcp) if c[1].endswith(":exportData")] == [("POST", f"mlinfra-{RUN}:exportData")]
    done = guard_object(gcp, GUARD + DONE)
    assert done["outcome"] == "export failed; file system kept: export failed: 3 files not copied"
    assert done["marker"] == "FAILED"


def test_at_expiry_the_nodes_still_there_are_deleted_then_export_then_delete(gcp):
    seed_run(gcp, nodes=2)
    before = ticks(gcp, EXPIRY - timedelta(minutes=3), 3)
    assert {r["outcome"] for r in before} == {"waiting: no completion marker, expires-at 2026-03-02T10:00:00.000000Z"}
    assert changes(gcp) == []  # before expires-at, without the marker, the guard only looks
    ticks(gcp, EXPIRY, 8)
    assert changes(gcp) == [
        ("DELETE", f"mlinfra-{RUN}-node-0"),
        ("DELETE", f"mlinfra-{RUN}-node-1"),
        ("POST", f"mlinfra-{RUN}:exportData"),
        ("DELETE", f"mlinfra-{RUN}"),
    ]
    assert guard_object(gcp, GUARD + DONE)["action"] == "expire" and not gcp.instances


def test_another_run_is_never_touched(gcp):
    seed_run(gcp, nodes=2)
    other = seed_run(gcp, OTHER, nodes=2)
    put_object(gcp.storage, f"runs/{OTHER}/_SUCCESS", b"{}")
    ignored = run(gcp, object_event(f"runs/{OTHER}/_SUCCESS", BEFORE), BEFORE)
    assert ignored["outcome"] == f"ignored: object 'runs/{OTHER}/_SUCCESS' is not runs/{RUN}/_SUCCESS or _FAILED"
    ticks(gcp, EXPIRY, 8)
    touched = [path for _, path in changes(gcp) if OTHER in path]
    assert touched == [] and gcp.file_systems[other]["state"] == "ACTIVE"
    assert len([key for key in gcp.instances if OTHER in key[1]]) == 2
    assert guard_objects(gcp, OTHER) == []


def test_the_nodes_copied_checkpoints_need_no_export(gcp):
    seed_run(gcp, nodes=1)
    marker = json.dumps({"exit_code": 0, "checkpoints_exported": True, "expires_at": int(EXPIRY.timestamp())})
    put_object(gcp.storage, f"runs/{RUN}/_SUCCESS", marker.encode())
    run(gcp, object_event(f"runs/{RUN}/_SUCCESS", BEFORE), BEFORE)
    ticks(gcp, BEFORE + timedelta(minutes=1), 4)
    assert not [c for c in changes(gcp) if c[1].endswith(":exportData")]
    assert guard_object(gcp, GUARD + DONE)["outcome"] == (
        "compute stopped; the nodes copied the checkpoints (this deployment's _SUCCESS); file system deleting"
    )


def test_a_marker_of_an_earlier_deployment_still_gets_an_export(gcp):
    seed_run(gcp, nodes=1)
    marker = json.dumps({"exit_code": 0, "checkpoints_exported": True, "expires_at": 1})
    put_object(gcp.storage, f"runs/{RUN}/_SUCCESS", marker.encode())
    ticks(gcp, BEFORE, 6)
    assert [c for c in changes(gcp) if c[1].endswith(":exportData")] == [("POST", f"mlinfra-{RUN}:exportData")]


def test_events_delivered_again_change_nothing_twice(gcp):
    seed_run(gcp, nodes=2)
    put_object(gcp.storage, f"runs/{RUN}/_SUCCESS", b"{}")
    event = object_event(f"runs/{RUN}/_SUCCESS", BEFORE)
    run(gcp, event, BEFORE)
    again = run(gcp, event, BEFORE + timedelta(seconds=5))  # Pub/Sub redelivers; the nodes are being deleted
    assert again["outcome"] == "2 node(s) of the run being deleted" and again["deleted"] == []
    assert len(changes(gcp)) == 2
    ticks(gcp, BEFORE + timedelta(minutes=1), 6)
    mutations = changes(gcp)
    run(gcp, event, BEFORE + timedelta(minutes=9))
    ticks(gcp, BEFORE + timedelta(minutes=10), 3)
    assert changes(gcp) == mutations  # done: nothing more is asked of anyone
    assert len([c for c in mutations if c[1].endswith(":exportData")]) == 1


def test_teardown_on_completion_false_waits_for_expiry(gcp):
    seed_run(gcp, nodes=1)
    put_object(gcp.storage, f"runs/{RUN}/_SUCCESS", b"{}")
    result = run(gcp, object_event(f"runs/{RUN}/_SUCCESS", BEFORE), BEFORE, MLINFRA_TEARDOWN_ON_COMPLETION="false")
    assert result["outcome"].startswith("waiting: teardownOnCompletion is false") and changes(gcp) == []


def test_export_checkpoints_false_deletes_without_export(gcp):
    seed_run(gcp, nodes=1)
    for i in range(4):
        run(gcp, tick(EXPIRY + timedelta(minutes=i)), EXPIRY + timedelta(minutes=i), MLINFRA_EXPORT_CHECKPOINTS="false")
    assert not [c for c in changes(gcp) if c[1].endswith(":exportData")]
    assert guard_object(gcp, GUARD + DONE)["outcome"].endswith("exportCheckpoints is false; file system deleting")


def test_a_running_import_is_waited_for(gcp):
    name = seed_run(gcp, nodes=0)
    gcp.add_lustre_operation(name, "IMPORT", EXPIRY, done=False)
    result = run(gcp, tick(EXPIRY), EXPIRY)
    assert result["outcome"] == f"import of {name} in progress"
    assert changes(gcp) == []


def test_an_unreachable_zone_is_an_error_never_nothing_there(gcp):
    seed_run(gcp, nodes=1)
    gcp.unreachable_zones.append("us-central1-b")
    result = run(gcp, tick(EXPIRY), EXPIRY)  # a tick is not retried: the next one comes a minute later
    assert result["action"] == "error" and "UNREACHABLE" in result["outcome"]
    assert not [c for c in changes(gcp) if c[0] == "DELETE"]
    assert guard_object(gcp, GUARD + "error-20260302T10.json")["outcome"] == result["outcome"]
    put_object(gcp.storage, f"runs/{RUN}/_SUCCESS", b"{}")
    with pytest.raises(Exception, match="UNREACHABLE"):  # a young marker event is raised: Eventarc retries it
        run(gcp, object_event(f"runs/{RUN}/_SUCCESS", EXPIRY), EXPIRY + timedelta(seconds=10))
    late = run(gcp, object_event(f"runs/{RUN}/_SUCCESS", EXPIRY), EXPIRY + timedelta(minutes=20))
    assert late["action"] == "error"  # past the retry window: acknowledged, the ticks go on


def test_ignores_what_is_not_its_own(gcp):
    assert run(gcp, {"message": {"attributes": {}}}, BEFORE)["outcome"].startswith("ignored: neither a tick")
    other = run(gcp, object_event(f"runs/{RUN}/_SUCCESS", BEFORE, bucket="elsewhere"), BEFORE)
    assert other["outcome"] == f"ignored: bucket 'elsewhere' is not the run's data bucket '{BUCKET}'"
    claim = run(gcp, object_event(f"runs/{RUN}/_CLAIM", BEFORE), BEFORE)
    assert claim["outcome"].startswith("ignored: object") and gcp.requests == []


def test_a_bad_environment_names_every_variable():
    env = guard_env(MLINFRA_RUN_ID="Bad_Id", MLINFRA_EXPIRES_AT="2026-13-40T10:00:00Z")
    del env["MLINFRA_PROJECT"]
    with pytest.raises(ConfigError) as raised:
        load_config(env)
    assert str(raised.value) == (
        "run guard misconfigured: MLINFRA_PROJECT is not set: a GCP project id; "
        "MLINFRA_RUN_ID='Bad_Id' is invalid: lowercase letters, digits and '-', up to 40 characters; "
        "MLINFRA_EXPIRES_AT='2026-13-40T10:00:00Z' is invalid: not a real time"
    )
    assert load_config(guard_env()).lustre_instance == INSTANCE


def test_the_entry_point_takes_the_cloudevent_as_cloud_run_delivers_it(gcp, monkeypatch):
    """main.py through functions-framework's own app (what Google's Python runtime serves): a CloudEvent in binary
    mode, as Eventarc pushes it, reaches the guard."""
    import functions_framework

    from tests.helpers import ROOT

    for key, value in {
        **guard_env(),
        "MLINFRA_GCP_API_ENDPOINT": gcp.base,
        "STORAGE_EMULATOR_HOST": gcp.storage,
    }.items():
        monkeypatch.setenv(key, value)
    seed_run(gcp, nodes=1)
    put_object(gcp.storage, f"runs/{RUN}/_SUCCESS", b"{}")
    app = functions_framework.create_app("guard", str(ROOT / "run_guard_gcp" / "main.py"), "cloudevent")
    answer = app.test_client().post(
        "/",
        json=object_event(f"runs/{RUN}/_SUCCESS", EXPIRY - timedelta(hours=1)),
        headers={
            "ce-specversion": "1.0",
            "ce-type": "google.cloud.pubsub.topic.v1.messagePublished",
            "ce-source": f"//pubsub.googleapis.com/projects/{PROJECT}/topics/mlinfra-{RUN}-guard",
            "ce-id": "2",
        },
    )
    assert answer.status_code == 200, answer.data
    assert changes(gcp)[0] == ("DELETE", f"mlinfra-{RUN}-node-0")
    assert f"/zones/{ZONE}/instances/" in next(path for method, path, _, _ in gcp.requests if method == "DELETE")
