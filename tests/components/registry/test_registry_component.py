import json

import pulumi_aws as aws
import pytest

from components.registry.aws.registry import ModelRegistry, ModelRegistryArgs
from infra.core.tags import contract_tags
from infra.registry.aws.config import RegistrySpec
from tests.helpers import by_type, one, taggable

TAGS = contract_tags("registry", "test")


def declare(spec: RegistrySpec | None = None, grants: bool = False):
    spec = spec or RegistrySpec()

    def program():
        registry = ModelRegistry("reg", ModelRegistryArgs(spec=spec, bucket_name="mlinfra-test-bucket", tags=TAGS))
        if grants:
            role = aws.iam.Role("trainer", assume_role_policy=json.dumps({"Version": "2012-10-17", "Statement": []}))
            registry.grant_read(role, "datasets/")
            registry.grant_write(role, "checkpoints/run-1/", "models/")

    return program


@pytest.fixture
def registry(record):
    return record(declare())


def test_bucket_and_key_are_protected_and_retained(registry):
    for token in ("aws:s3/bucket:Bucket", "aws:kms/key:Key"):
        step = one(registry, token)
        assert step.protect and step.retain_on_delete, token
    assert one(registry, "aws:s3/bucket:Bucket").inputs["forceDestroy"] is False


def test_nothing_else_is_protected(registry):
    kept = {s.type for s in registry.resources() if s.protect}
    assert kept == {"aws:s3/bucket:Bucket", "aws:kms/key:Key"}


def test_versioning_public_access_and_ownership(registry):
    assert one(registry, "aws:s3/bucketVersioning:BucketVersioning").inputs["versioningConfiguration"] == {
        "status": "Enabled"
    }
    block = one(registry, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock").inputs
    assert all(
        block[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    )
    ownership = one(registry, "aws:s3/bucketOwnershipControls:BucketOwnershipControls").inputs
    assert ownership["rule"] == {"objectOwnership": "BucketOwnerEnforced"}


def test_sse_kms_with_its_own_rotating_key_and_bucket_key(registry):
    key = one(registry, "aws:kms/key:Key")
    assert key.inputs["enableKeyRotation"] is True
    [rule] = one(
        registry, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
    ).inputs["rules"]
    assert rule["bucketKeyEnabled"] is True
    assert rule["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms"
    assert rule["applyServerSideEncryptionByDefault"]["kmsMasterKeyId"] == key.outputs["arn"]


def test_bucket_policy_is_tls_only(registry):
    policy = json.loads(one(registry, "aws:s3/bucketPolicy:BucketPolicy").inputs["policy"])
    assert policy["Statement"][0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert policy["Statement"][0]["Resource"][0] == "arn:aws:s3:::mlinfra-test-bucket"


def test_lifecycle_expires_noncurrent_versions_and_aborts_uploads(registry):
    rules = {
        r["id"]: r
        for r in one(registry, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration").inputs["rules"]
    }
    assert rules["expire-noncurrent-versions"]["noncurrentVersionExpiration"] == {
        "noncurrentDays": 90,
        "newerNoncurrentVersions": 3,
    }
    assert rules["abort-incomplete-uploads"]["abortIncompleteMultipartUpload"] == {"daysAfterInitiation": 7}
    assert all(r["status"] == "Enabled" for r in rules.values())


def test_events_go_to_eventbridge_and_object_lock_is_off_by_default(registry):
    assert one(registry, "aws:s3/bucketNotification:BucketNotification").inputs["eventbridge"] is True
    assert by_type(registry, "aws:s3/bucketObjectLockConfiguration:BucketObjectLockConfiguration") == []
    assert "objectLockEnabled" not in one(registry, "aws:s3/bucket:Bucket").inputs  # ForceNew: would replace the bucket


def test_object_lock_when_asked(record):
    spec = RegistrySpec.model_validate({"objectLock": {"enabled": True, "mode": "COMPLIANCE", "retentionDays": 365}})
    result = record(declare(spec))
    lock = one(result, "aws:s3/bucketObjectLockConfiguration:BucketObjectLockConfiguration").inputs
    assert lock["objectLockEnabled"] == "Enabled"
    assert lock["rule"] == {"defaultRetention": {"mode": "COMPLIANCE", "days": 365}}


def test_every_taggable_resource_carries_the_contract_tags(registry):
    tagged = [s for s in registry.resources() if taggable(s)]
    assert {s.type for s in tagged} == {"aws:s3/bucket:Bucket", "aws:kms/key:Key"}
    for step in tagged:
        assert step.inputs["tags"] == TAGS


def test_children_are_parented_to_the_component(registry):
    component = one(registry, "mlinfra:registry:ModelRegistry")
    assert all(s.parent == component.urn for s in registry.resources() if s.custom)
    assert all(s.name.startswith("reg-") for s in registry.resources() if s.custom)


def test_grants_produce_least_privilege_role_policies(record):
    result = record(declare(grants=True))
    policies = {s.name: json.loads(s.inputs["policy"]) for s in by_type(result, "aws:iam/rolePolicy:RolePolicy")}
    assert len(policies) == 2
    assert all(
        n.startswith(("trainer-registry-read-datasets-", "trainer-registry-write-checkpoints-run-1-models-"))
        for n in policies
    )
    write = next(doc for name, doc in policies.items() if "-write-" in name)
    statement = next(s for s in write["Statement"] if s["Sid"] == "RegistryWrite")
    assert statement["Resource"] == [
        "arn:aws:s3:::mlinfra-test-bucket/checkpoints/run-1/*",
        "arn:aws:s3:::mlinfra-test-bucket/models/*",
    ]
    role = one(result, "aws:iam/role:Role")
    assert all(s.parent == role.urn for s in by_type(result, "aws:iam/rolePolicy:RolePolicy"))


def test_a_grant_outside_the_layout_fails_at_declaration(record):
    def program():
        registry = ModelRegistry("reg", ModelRegistryArgs(spec=RegistrySpec(), bucket_name="b-b-b", tags=TAGS))
        role = aws.iam.Role("r", assume_role_policy="{}")
        registry.grant_read(role, "*")

    result = record(program)
    assert any("registry prefix '*'" in d.message for d in result.errors)
