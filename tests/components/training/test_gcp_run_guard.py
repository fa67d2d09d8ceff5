"""The GCP run guard component under the recording mocks, and the guard's source as deployed: what triggers it,
whom it grants what, and what its archive holds."""

from __future__ import annotations

import re

import pytest

from components.training.gcp.run_guard import GcpRunGuard, GcpRunGuardArgs, source_archive
from infra.training.gcp import guard
from tests.helpers import ROOT, by_type, one

RUN, PROJECT, ZONE, BUCKET = "llama-7b-gcp-001", "mlinfra-test", "us-central1-a", "mlinfra-training-test"
INSTANCE = f"projects/{PROJECT}/locations/{ZONE}/instances/mlinfra-{RUN}"


def program(run_id: str = RUN, **changes):
    def declare():
        fields = dict(
            run_id=run_id,
            project=PROJECT,
            region="us-central1",
            zone=ZONE,
            data_bucket=BUCKET,
            lustre_instance=INSTANCE,
            expires_at="2026-03-02T10:00:00Z",
            teardown_on_completion=True,
            export_checkpoints=True,
            labels={"mlinfra-run-id": run_id, "mlinfra-role": "training"},
        )
        fields.update(changes)
        GcpRunGuard("g", GcpRunGuardArgs(**fields))

    return declare


@pytest.fixture
def declared(record):
    result = record(program(), config={"gcp:project": PROJECT, "gcp:region": "us-central1"})
    assert result.errors == []
    return result


def test_the_marker_notification_and_the_tick_feed_the_functions_topic(declared):
    topic = one(declared, "gcp:pubsub/topic:Topic")
    topic_id = f"projects/{PROJECT}/topics/mlinfra-{RUN}-guard"
    notification = one(declared, "gcp:storage/notification:Notification").inputs
    assert notification == {
        "bucket": BUCKET,
        "topic": topic_id,
        "payloadFormat": "JSON_API_V1",
        "eventTypes": ["OBJECT_FINALIZE"],
        "objectNamePrefix": f"runs/{RUN}/_",
    }
    job = one(declared, "gcp:cloudscheduler/job:Job").inputs
    assert (job["schedule"], job["timeZone"], job["region"]) == ("* * * * *", "Etc/UTC", "us-central1")
    assert job["pubsubTarget"] == {"topicName": topic_id, "attributes": {"mlinfra-guard": "tick"}}
    trigger = one(declared, "gcp:cloudfunctionsv2/function:Function").inputs["eventTrigger"]
    assert trigger["eventType"] == "google.cloud.pubsub.topic.v1.messagePublished"
    assert (trigger["pubsubTopic"], trigger["retryPolicy"]) == (topic_id, "RETRY_POLICY_RETRY")
    assert topic.inputs["labels"]["mlinfra-run-id"] == RUN
    publisher = one(declared, "gcp:pubsub/topicIAMMember:TopicIAMMember").inputs
    assert publisher["topic"] == topic_id and publisher["role"] == "roles/pubsub.publisher"
    assert re.fullmatch(
        r"serviceAccount:service-\d+@gs-project-accounts\.iam\.gserviceaccount\.com", publisher["member"]
    )


def test_the_function_runs_the_deployed_source_one_step_at_a_time(declared):
    function = one(declared, "gcp:cloudfunctionsv2/function:Function").inputs
    build, service = function["buildConfig"], function["serviceConfig"]
    assert (build["runtime"], build["entryPoint"]) == ("python312", "guard")
    source = build["source"]["storageSource"]
    assert source["bucket"] == BUCKET and source["object"].startswith(f"runs/{RUN}/guard/source/run_guard_gcp-")
    assert (service["maxInstanceCount"], service["maxInstanceRequestConcurrency"]) == (1, 1)
    assert service["timeoutSeconds"] <= 540 and service["ingressSettings"] == "ALLOW_INTERNAL_ONLY"
    assert service["environmentVariables"] == guard.environment(
        PROJECT, RUN, BUCKET, INSTANCE, "2026-03-02T10:00:00Z", True, True
    )
    account = f"guard-{RUN}@{PROJECT}.iam.gserviceaccount.com"
    assert service["serviceAccountEmail"] == account == function["eventTrigger"]["serviceAccountEmail"]
    invoker = one(declared, "gcp:cloudrunv2/serviceIamMember:ServiceIamMember").inputs
    assert (invoker["name"], invoker["role"]) == (f"mlinfra-{RUN}-guard", "roles/run.invoker")


def test_the_guard_can_touch_only_its_runs_nodes_and_its_own_prefix(declared):
    members = {
        m.inputs["role"]: m.inputs.get("condition") for m in by_type(declared, "gcp:projects/iAMMember:IAMMember")
    }
    prefix = f"projects/{PROJECT}/zones/{ZONE}"
    assert members["roles/compute.instanceAdmin.v1"]["expression"] == (
        f"resource.name.startsWith('{prefix}/instances/mlinfra-{RUN}-node-') || "
        f"resource.name.startsWith('{prefix}/disks/mlinfra-{RUN}-node-')"
    )
    custom = one(declared, "gcp:projects/iAMCustomRole:IAMCustomRole").inputs
    assert (
        custom["roleId"] == "mlinfraGuard_llama_7b_gcp_001"
        and members[f"projects/{PROJECT}/roles/{custom['roleId']}"] is None
    )
    assert custom["permissions"] == list(guard.UNSCOPED_PERMISSIONS)
    assert not [p for p in custom["permissions"] if p.endswith((".create", ".update", ".setIamPolicy", ".importData"))]
    storage = {b.inputs["role"]: b.inputs for b in by_type(declared, "gcp:storage/bucketIAMMember:BucketIAMMember")}
    objects = f"projects/_/buckets/{BUCKET}/objects"
    assert storage["roles/storage.objectViewer"]["condition"]["expression"] == (
        f"resource.name.startsWith('{objects}/runs/{RUN}/')"
    )
    assert storage["roles/storage.objectCreator"]["condition"]["expression"] == (
        f"resource.name.startsWith('{objects}/runs/{RUN}/guard/')"
    )
    assert set(storage) == {"roles/storage.objectViewer", "roles/storage.objectCreator"}  # nothing can delete


def test_every_name_fits_googles_limits_for_the_longest_run_id(record):
    longest = "r" + "-x" * 19 + "9"  # 40 characters, the longest valid run id
    assert len(longest) == 40
    result = record(program(longest), config={"gcp:project": PROJECT, "gcp:region": "us-central1"})
    assert result.errors == []
    function = one(result, "gcp:cloudfunctionsv2/function:Function").inputs["name"]
    assert re.fullmatch(r"[a-z](?:[-a-z0-9]{0,47}[a-z0-9])?", function)  # its Cloud Run service: 49 characters
    assert len(one(result, "gcp:pubsub/topic:Topic").inputs["name"]) <= 255
    assert re.fullmatch(
        r"[a-z][a-z0-9-]{4,28}[a-z0-9]", one(result, "gcp:serviceaccount/account:Account").inputs["accountId"]
    )
    assert re.fullmatch(
        r"[a-zA-Z0-9_.]{3,64}", one(result, "gcp:projects/iAMCustomRole:IAMCustomRole").inputs["roleId"]
    )
    assert len(one(result, "gcp:cloudscheduler/job:Job").inputs["name"]) <= 500


def test_the_archive_holds_main_requirements_and_the_package_only():
    name, archive = source_archive()
    assert re.fullmatch(r"run_guard_gcp-[0-9a-f]{16}\.zip", name)
    paths = set(archive.assets)
    assert {"main.py", "requirements.txt", "run_guard_gcp/guard.py", "run_guard_gcp/api.py"} <= paths
    assert not [p for p in paths if "__pycache__" in p or p.endswith(".pyc")]
    assert all(p in ("main.py", "requirements.txt") or p.startswith("run_guard_gcp/") for p in paths)


def test_the_functions_requirements_are_the_projects_pins():
    pins = dict(
        line.split("==") for line in (ROOT / "pyproject.toml").read_text(encoding="utf-8").split('"') if "==" in line
    )
    wanted = [
        line
        for line in guard.SOURCE_DIR.joinpath("requirements.txt").read_text(encoding="utf-8").splitlines()
        if "==" in line
    ]
    assert wanted and all(pins.get(line.split("==")[0]) == line.split("==")[1] for line in wanted), wanted


def test_the_guard_imports_only_what_its_requirements_install():
    allowed = {"functions_framework", "google", "requests", "run_guard_gcp", "__future__"}
    stdlib = {"json", "os", "re", "uuid", "urllib", "collections", "dataclasses", "datetime", "typing"}
    found = set()
    for path in guard.SOURCE_DIR.glob("*.py"):
        found |= set(re.findall(r"^\s*(?:from|import) ([a-z_]+)", path.read_text(encoding="utf-8"), re.M))
    assert found - allowed - stdlib == set()


def test_the_tick_attribute_is_the_one_the_guard_reads():
    from run_guard_gcp.guard import TICK_ATTRIBUTE

    assert guard.TICK_ATTRIBUTES == dict([TICK_ATTRIBUTE])
