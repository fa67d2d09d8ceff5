"""The registry's mirror on GCP (`registry` kind, cloud gcp) through the offline preview: a protected, CMEK,
versioned, uniform-access bucket readable by the configured serving identities only, and a scheduled transfer of
models/ alone that deletes nothing; config errors exit 2 naming the key; the AWS registry's optional STS role."""

from __future__ import annotations

import json

import pulumi
import pytest
import yaml

from infra.tools.offline.engine import preview
from infra.tools.offline.invokes_gcp import OFFLINE_PROJECT_NUMBER, OFFLINE_STS_SUBJECT_ID
from stacks.gcp.registry import mirror_role_arn
from tests.helpers import ROOT, by_type, one, run_cli

STACK = "registry-gcp-mirror"
BUCKET = "gcp:storage/bucket:Bucket"
JOB = "gcp:storage/transferJob:TransferJob"
IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
KEY = "gcp:kms/cryptoKey:CryptoKey"
READER = "model-llama-3-8b-l4@mlinfra-demo-project.iam.gserviceaccount.com"
STS_AGENT = f"serviceAccount:project-{OFFLINE_PROJECT_NUMBER}@storage-transfer-service.iam.gserviceaccount.com"
GCS_AGENT = f"serviceAccount:service-{OFFLINE_PROJECT_NUMBER}@gs-project-accounts.iam.gserviceaccount.com"


@pytest.fixture(scope="module")
def mirror():
    return preview(STACK)


def test_previews_without_errors_or_unknown_properties(mirror):
    assert [d.message for d in mirror.errors] == []
    assert {s.type for s in mirror.resources()} == {
        "gcp:kms/keyRing:KeyRing",
        KEY,
        "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember",
        BUCKET,
        IAM,
        JOB,
        "pulumi:pulumi:StackReference",
        "mlinfra:registry:GcsRegistryMirror",
    }
    assert mirror.outputs["bucketName"] == "mlinfra-models-bridge-demo"
    assert mirror.outputs["sourceBucket"] == "mlinfra-registry-123456789012-us-east-1"  # from the AWS registry stack
    assert mirror.outputs["transferAgentSubjectId"] == OFFLINE_STS_SUBJECT_ID


def test_bucket_is_private_versioned_cmek_and_protected(mirror):
    bucket = one(mirror, BUCKET)
    key = one(mirror, KEY)
    inputs = bucket.inputs
    assert inputs["uniformBucketLevelAccess"] is True and inputs["publicAccessPrevention"] == "enforced"
    assert inputs["versioning"] == {"enabled": True} and inputs["forceDestroy"] is False
    assert inputs["encryption"]["defaultKmsKeyName"] == key.outputs["id"]
    assert key.outputs["id"].startswith("projects/mlinfra-demo-project/locations/us-central1/keyRings/")
    assert inputs["location"] == "US-CENTRAL1"
    assert key.inputs["rotationPeriod"] == f"{90 * 86400}s" and key.inputs["purpose"] == "ENCRYPT_DECRYPT"
    assert inputs["lifecycleRules"] == [
        {
            "action": {"type": "Delete"},
            "condition": {"daysSinceNoncurrentTime": 90, "numNewerVersions": 3, "withState": "ARCHIVED"},
        }
    ]
    for step in (bucket, key, one(mirror, "gcp:kms/keyRing:KeyRing")):
        assert step.protect and step.retain_on_delete, step.name
    # The GCS service agent may use the key, and the bucket waits for that grant.
    use = one(mirror, "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")
    assert use.inputs == {
        "cryptoKeyId": key.outputs["id"],
        "role": "roles/cloudkms.cryptoKeyEncrypterDecrypter",
        "member": GCS_AGENT,
    }
    assert use.urn in bucket.dependencies


def test_transfer_copies_models_only_on_a_schedule_and_deletes_nothing(mirror):
    job = one(mirror, JOB).inputs
    spec = job["transferSpec"]
    assert spec["awsS3DataSource"] == {
        "bucketName": "mlinfra-registry-123456789012-us-east-1",
        "path": "models/",
        "roleArn": "arn:aws:iam::123456789012:role/mlinfra-registry-gcp-mirror",
    }
    assert spec["gcsDataSink"] == {"bucketName": "mlinfra-models-bridge-demo", "path": "models/"}
    assert "objectConditions" not in spec  # the source path alone scopes it
    assert spec["transferOptions"] == {
        "overwriteWhen": "DIFFERENT",
        "deleteObjectsFromSourceAfterTransfer": False,
        "deleteObjectsUniqueInSink": False,
    }
    assert job["schedule"] == {
        "scheduleStartDate": {"year": 2026, "month": 1, "day": 1},
        "startTimeOfDay": {"hours": 2, "minutes": 0, "seconds": 0, "nanos": 0},
        "repeatInterval": "86400s",
    }
    assert job["status"] == "ENABLED"
    writer = [s for s in by_type(mirror, IAM) if s.inputs["member"] == STS_AGENT]
    assert writer and writer[0].urn in one(mirror, JOB).dependencies


def test_bucket_iam_is_the_configured_readers_plus_the_transfer_writer_only(mirror):
    grants = sorted((s.inputs["role"], s.inputs["member"]) for s in by_type(mirror, IAM))
    assert grants == [
        ("roles/storage.legacyBucketWriter", STS_AGENT),
        ("roles/storage.objectViewer", f"serviceAccount:{READER}"),
    ]


def test_more_readers_get_one_binding_each():
    other = "model-qwen-2-7b@mlinfra-demo-project.iam.gserviceaccount.com"
    result = preview(STACK, [("mlinfra:registry.mirror.readers[1]", other)])
    viewers = sorted(
        s.inputs["member"] for s in by_type(result, IAM) if s.inputs["role"] == "roles/storage.objectViewer"
    )
    assert viewers == sorted([f"serviceAccount:{other}", f"serviceAccount:{READER}"])


def test_hourly_schedule_sets_the_repeat_interval():
    result = preview(STACK, [("mlinfra:registry.mirror.schedule.intervalHours", "1")])
    assert one(result, JOB).inputs["schedule"]["repeatInterval"] == "3600s"


def test_serving_gcp_demo_reads_the_mirror_and_its_servers_are_the_readers():
    serving = yaml.safe_load((ROOT / "stacks" / "Pulumi.serving-gcp-demo.yaml").read_text(encoding="utf-8"))["config"]
    mirror = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{STACK}.yaml").read_text(encoding="utf-8"))["config"][
        "mlinfra:registry"
    ]["mirror"]
    assert serving["mlinfra:serving"]["modelStore"]["bucket"] == mirror["bucketName"]
    from infra.core.labels import account_id

    accounts = [
        f"{account_id('model', m['name'])}@{serving['gcp:project']}.iam.gserviceaccount.com"
        for m in serving["mlinfra:serving"]["models"]
    ]
    assert accounts == mirror["readers"]


@pytest.mark.parametrize(
    "override, expected",
    [
        (
            "mlinfra:registry.mirror.readers[0]=allUsers",
            "error: mlinfra:registry.mirror.readers: 'allUsers' is not a service account email",
        ),
        (
            "mlinfra:registry.mirror.schedule.intervalHours=0",
            "error: mlinfra:registry.mirror.schedule.intervalHours: must be at least 1 (got 0)",
        ),
        (
            "mlinfra:registry.mirror.schedule.startTimeUtc=25:00",
            "error: mlinfra:registry.mirror.schedule.startTimeUtc: must be a time HH:MM (24-hour, UTC) (got '25:00')",
        ),
        (
            "mlinfra:registry.mirror.sourceStack=serving-demo",
            "error: mlinfra:registry.mirror.sourceStack: stack 'serving-demo' is a serving stack on aws; the "
            "mirror copies "
            "from the AWS registry stack (mlinfra:kind registry, cloud aws)",
        ),
        (
            "mlinfra:registry.mirror.roleArn=role/x",
            "error: mlinfra:registry.mirror.roleArn: must be an IAM role ARN such as "
            "arn:aws:iam::123456789012:role/registry-gcp-mirror (got 'role/x')",
        ),
        (
            "mlinfra:registry.mirror.bucketName=Bad_Name",
            "error: mlinfra:registry.mirror.bucketName: String should match pattern",
        ),
        (
            "mlinfra:registry.mirror.deleteSource=true",
            "error: mlinfra:registry.mirror.deleteSource: unknown key; allowed: bucketName, keyRotationDays, "
            "lifecycle, "
            "readers, roleArn, schedule, sourceStack",
        ),
    ],
)
def test_config_errors_exit_2_naming_the_key(override, expected):
    result = run_cli("preview", "--stack", STACK, "-c", override)
    assert result.returncode == 2, result.stdout + result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_role_arn_comes_from_config_or_the_registry_stack_else_names_the_key():
    assert mirror_role_arn("arn:aws:iam::1:role/a", "arn:aws:iam::1:role/b", "registry") == "arn:aws:iam::1:role/a"
    assert mirror_role_arn(None, "arn:aws:iam::1:role/b", "registry") == "arn:aws:iam::1:role/b"
    with pytest.raises(
        pulumi.RunError,
        match=r"^mlinfra:registry.mirror.roleArn: required: registry stack 'registry' "
        "exports no gcpMirrorRoleArn",
    ):
        mirror_role_arn(None, None, "registry")


def test_aws_registry_grants_the_transfer_agent_read_on_models_only():
    result = preview("registry", [("mlinfra:registry.gcpMirror.stsSubjectIds[0]", OFFLINE_STS_SUBJECT_ID)])
    assert [d.message for d in result.errors] == []
    role = next(s for s in by_type(result, "aws:iam/role:Role") if s.name == "registry-gcp-mirror")
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert trust == [
        {
            "Sid": "StorageTransferServiceOnly",
            "Effect": "Allow",
            "Principal": {"Federated": "accounts.google.com"},
            "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": {"StringEquals": {"accounts.google.com:sub": [OFFLINE_STS_SUBJECT_ID]}},
        }
    ]
    assert role.inputs["name"] == "mlinfra-registry-gcp-mirror"
    policy = next(s for s in by_type(result, "aws:iam/rolePolicy:RolePolicy") if s.parent == role.urn)
    statements = {s["Sid"]: s for s in json.loads(policy.inputs["policy"])["Statement"]}
    assert statements["RegistryRead"]["Resource"] == ["arn:aws:s3:::mlinfra-registry-123456789012-us-east-1/models/*"]
    assert statements["RegistryList"]["Condition"] == {"StringLike": {"s3:prefix": ["models/*"]}}
    assert "gcpMirrorRoleArn" in result.outputs
    assert "gcpMirrorRoleArn" not in preview("registry").outputs  # off by default


def test_aws_registry_rejects_a_subject_id_that_is_not_numeric():
    result = run_cli("preview", "--stack", "registry", "-c", "mlinfra:registry.gcpMirror.stsSubjectIds[0]=abc")
    assert result.returncode == 2
    assert result.stderr == (
        "error: mlinfra:registry.gcpMirror.stsSubjectIds: 'abc' is not a Google subject id (digits "
        "only, e.g. 100000000000000000001)\n"
    )
