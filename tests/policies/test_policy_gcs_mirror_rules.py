"""Rules of the registry's mirror on GCP (GCS bucket not public, CMEK, versioned, no public grants; transfer jobs
copy models/ only and delete nothing): the compliant fixture passes, each broken field gives its exact message, and
the runner passes the real registry-gcp-mirror stack (exit 0) and fails a broken preview of it (exit 1)."""

import json

import pytest

from policies.model import UNKNOWN, Resource
from policies.rules.registry import (
    gcs_buckets_encrypted_with_cmek,
    gcs_buckets_not_granted_to_the_public,
    gcs_buckets_not_public,
    gcs_buckets_versioned,
    transfer_jobs_copy_models_only,
    transfer_jobs_never_delete,
)
from tests.helpers import run_cli

STACK = "registry-gcp-mirror"
BUCKET = "gcp:storage/bucket:Bucket"
JOB = "gcp:storage/transferJob:TransferJob"
MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
KEY = "projects/p/locations/us-central1/keyRings/r/cryptoKeys/k"


def bucket(**changes):
    props = {
        "name": "mirror",
        "uniformBucketLevelAccess": True,
        "publicAccessPrevention": "enforced",
        "versioning": {"enabled": True},
        "encryption": {"defaultKmsKeyName": KEY},
        **changes,
    }
    return Resource(BUCKET, {k: v for k, v in props.items() if v is not None}, name="mirror-bucket")


def job(source=None, conditions=None, **options):
    spec = {
        "awsS3DataSource": source or {"bucketName": "registry", "path": "models/", "roleArn": "arn"},
        "gcsDataSink": {"bucketName": "mirror", "path": "models/"},
        "transferOptions": {
            "overwriteWhen": "DIFFERENT",
            "deleteObjectsFromSourceAfterTransfer": False,
            "deleteObjectsUniqueInSink": False,
            **options,
        },
    }
    if conditions is not None:
        spec["objectConditions"] = conditions
    return Resource(JOB, {"transferSpec": spec}, name="mirror-transfer")


def member(who="serviceAccount:model-a@p.iam.gserviceaccount.com"):
    return Resource(MEMBER, {"bucket": "mirror", "role": "roles/storage.objectViewer", "member": who}, name="reader")


MODULES = [
    gcs_buckets_not_public,
    gcs_buckets_encrypted_with_cmek,
    gcs_buckets_versioned,
    gcs_buckets_not_granted_to_the_public,
    transfer_jobs_copy_models_only,
    transfer_jobs_never_delete,
]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.NAME)
def test_compliant_resources_pass(module):
    for resource in (
        bucket(),
        job(),
        job(source={"bucketName": "r", "path": ""}, conditions={"includePrefixes": ["models/a/"]}),
        member(),
    ):
        if module.RULE.applies_to(resource.type):
            assert module.check(resource) == []


@pytest.mark.parametrize(
    "module, resource, expected",
    [
        (
            gcs_buckets_not_public,
            bucket(uniformBucketLevelAccess=False),
            [
                "uniformBucketLevelAccess is not true, so object ACLs can grant access that bucket IAM does "
                "not show; set it true"
            ],
        ),
        (
            gcs_buckets_not_public,
            bucket(publicAccessPrevention="inherited"),
            ["publicAccessPrevention is 'inherited', so the bucket could be made public; set it to 'enforced'"],
        ),
        (
            gcs_buckets_not_public,
            bucket(publicAccessPrevention=None),
            ["publicAccessPrevention is None, so the bucket could be made public; set it to 'enforced'"],
        ),
        (
            gcs_buckets_encrypted_with_cmek,
            bucket(encryption=None),
            [
                "encryption.defaultKmsKeyName is not set, so objects are encrypted with a Google-managed key; "
                "set it to a Cloud "
                "KMS crypto key in the bucket's location (with a rotation period) and let the Cloud Storage "
                "service agent use it"
            ],
        ),
        (
            gcs_buckets_versioned,
            bucket(versioning={"enabled": False}),
            [
                "versioning.enabled is not true, so an overwritten or deleted object is gone; set "
                "versioning.enabled true (and "
                "expire noncurrent versions with a lifecycle rule)"
            ],
        ),
        (
            gcs_buckets_versioned,
            bucket(versioning=None),
            [
                "versioning.enabled is not true, so an overwritten or deleted object is gone; set "
                "versioning.enabled true (and "
                "expire noncurrent versions with a lifecycle rule)"
            ],
        ),
        (
            gcs_buckets_not_granted_to_the_public,
            member("allUsers"),
            [
                "roles/storage.objectViewer is granted to allUsers; grant it to the service accounts that "
                "need it instead"
            ],
        ),
        (
            transfer_jobs_copy_models_only,
            job(source={"bucketName": "registry", "path": ""}),
            [
                "the transfer copies '' (source path + includePrefixes), outside models/; set the source path "
                "to 'models/' (or "
                "objectConditions.includePrefixes under it)"
            ],
        ),
        (
            transfer_jobs_copy_models_only,
            job(source={"bucketName": "r"}, conditions={"includePrefixes": ["models/", "checkpoints/"]}),
            [
                "the transfer copies 'checkpoints/' (source path + includePrefixes), outside models/; set the "
                "source path to "
                "'models/' (or objectConditions.includePrefixes under it)"
            ],
        ),
        (
            transfer_jobs_never_delete,
            job(deleteObjectsFromSourceAfterTransfer=True),
            [
                "transferOptions.deleteObjectsFromSourceAfterTransfer is true, so the transfer deletes the "
                "registry's objects "
                "once copied; set it false (the registry is the source of truth)"
            ],
        ),
        (
            transfer_jobs_never_delete,
            job(deleteObjectsUniqueInSink="true"),
            [
                "transferOptions.deleteObjectsUniqueInSink is true, so the transfer deletes mirrored objects "
                "servers may be "
                "reading; set it false (noncurrent versions expire by lifecycle rule)"
            ],
        ),
    ],
)
def test_broken_field_gives_its_exact_message(module, resource, expected):
    assert module.check(resource) == expected


def test_unknown_values_are_skipped():
    assert gcs_buckets_encrypted_with_cmek.check(bucket(encryption={"defaultKmsKeyName": UNKNOWN})) == []
    assert transfer_jobs_copy_models_only.check(Resource(JOB, {"transferSpec": UNKNOWN})) == []


def test_runner_passes_the_mirror_stack():
    done = run_cli("policy", "--stack", STACK)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 mandatory, 0 advisory violation(s)" in done.stdout


def test_runner_fails_a_broken_mirror_preview(tmp_path):
    preview = run_cli("preview", "--stack", STACK, "--json")
    assert preview.returncode == 0, preview.stderr
    document = json.loads(preview.stdout)
    for step in document["steps"]:
        if step["newState"]["type"] == JOB:
            step["newState"]["inputs"]["transferSpec"]["awsS3DataSource"]["path"] = ""
            step["newState"]["inputs"]["transferSpec"]["transferOptions"]["deleteObjectsFromSourceAfterTransfer"] = True
    path = tmp_path / "preview.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    done = run_cli("policy", "--preview-json", str(path), "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    assert sorted(v["policy"] for v in json.loads(done.stdout)["violations"]) == [
        "transfer-jobs-copy-models-only",
        "transfer-jobs-never-delete",
    ]
