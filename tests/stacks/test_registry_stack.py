"""The registry stack through the offline preview: the real program, its config, its outputs."""

import pulumi
import pulumi_aws as aws

from infra.core.tags import missing_contract_tags
from infra.tools.offline.digest import to_digest
from infra.tools.offline.engine import preview
from tests.helpers import one, taggable


def test_registry_previews_without_errors(registry_preview):
    assert registry_preview.errors == []
    assert len(registry_preview.resources()) >= 10


def test_outputs_for_the_other_stacks(registry_preview):
    out = registry_preview.outputs
    assert out["bucketName"] == "mlinfra-registry-123456789012-us-east-1"
    assert out["bucketArn"] == "arn:aws:s3:::mlinfra-registry-123456789012-us-east-1"
    assert out["kmsKeyArn"].startswith("arn:aws:kms:us-east-1:123456789012:key/")
    assert out["prefixes"] == {
        "datasets": "datasets/",
        "checkpoints": "checkpoints/",
        "models": "models/",
        "runs": "runs/",
    }


def test_offline_values_are_marked(registry_preview):
    notes = [d.message for d in registry_preview.diagnostics if d.severity == "info"]
    assert any("getCallerIdentity" in n and "123456789012" in n for n in notes)


def test_every_taggable_resource_has_the_contract_tags(registry_preview):
    for step in registry_preview.resources():
        if taggable(step):
            assert missing_contract_tags("registry", step.inputs.get("tags")) == [], step.urn
            assert step.inputs["tags"]["mlinfra:stack"] == "registry"


def test_digest_shape(registry_preview):
    digest = to_digest(registry_preview)
    assert set(digest) >= {"steps", "diagnostics", "changeSummary"}
    for step in digest["steps"]:
        assert step["op"] in ("create", "read")
        assert set(step["newState"]) >= {
            "type",
            "custom",
            "inputs",
            "parent",
            "protect",
            "retainOnDelete",
            "dependencies",
        }
    bucket = next(s for s in digest["steps"] if s["newState"]["type"] == "aws:s3/bucket:Bucket")
    assert bucket["newState"]["protect"] is True and bucket["newState"]["retainOnDelete"] is True
    assert (
        bucket["urn"]
        == "urn:pulumi:registry::mlinfra::mlinfra:registry:ModelRegistry$aws:s3/bucket:Bucket::registry-bucket"
    )
    assert digest["changeSummary"]["create"] == len(digest["steps"])


def test_explicit_bucket_name_from_config():
    from infra.tools.offline.engine import preview

    result = preview("registry", [("mlinfra:registry.bucketName", "team-models")])
    assert one(result, "aws:s3/bucket:Bucket").inputs["bucket"] == "team-models"


def test_unknown_input_property_is_an_error_diagnostic(record):
    def program():
        # A raw dict slips past the typed Args classes; the offline schema check must catch the typo.
        aws.s3.BucketLifecycleConfiguration(
            "lc", bucket="b", rules=[{"id": "x", "status": "Enabled", "expirationz": {"days": 1}}]
        )

    result = record(program)
    [error] = result.errors
    assert error.message == (
        "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration 'lc': "
        "unknown input property 'rules[0].expirationz' (did you mean 'expiration'?)"
    )
    assert error.urn.endswith("::lc")


def test_bad_config_under_pulumi_up_stops_before_any_resource(record):
    import stacks

    def program():
        pulumi.runtime.set_all_config({"mlinfra:kind": "registry", "mlinfra:registry": '{"objectLock": {"mode": "X"}}'})
        stacks.build()

    result = record(program)
    assert [d.message for d in result.errors] == [
        "invalid mlinfra config:\nmlinfra:registry.objectLock.mode: must be one of 'GOVERNANCE', 'COMPLIANCE' (got 'X')"
    ]
    assert result.resources() == []


def test_stack_reference_resolves_from_the_referenced_stacks_offline_run(record, registry_preview):
    def program():
        ref = pulumi.StackReference("acme/mlinfra/registry")
        pulumi.export("bucketArn", ref.require_output("bucketArn"))

    result = record(program)
    assert result.errors == []
    assert result.outputs["bucketArn"] == registry_preview.outputs["bucketArn"]
    [read] = [s for s in result.steps if s.type == "pulumi:pulumi:StackReference"]
    assert read.op == "read"


def test_duplicate_resource_names_are_an_error(record):
    def program():
        aws.s3.Bucket("same")
        aws.s3.Bucket("same")

    result = record(program)
    assert [d.message for d in result.errors] == [
        "duplicate resource URN urn:pulumi:test::mlinfra::aws:s3/bucket:Bucket::same; give each resource a unique name"
    ]


def test_a_failing_stack_output_is_a_diagnostic_and_later_runs_still_work(record):
    def program():
        bucket = aws.s3.Bucket("b")
        pulumi.export("broken", bucket.arn.apply(lambda arn: 1 / 0))

    result = record(program)
    assert any("ZeroDivisionError" in d.message for d in result.errors)
    assert record(lambda: aws.s3.Bucket("again")).errors == []


def test_registry_key_admits_fsx_data_repository_roles(registry_preview):
    import json

    policy = json.loads(one(registry_preview, "aws:kms/key:Key").inputs["policy"])
    assert [s["Sid"] for s in policy["Statement"]] == [
        "AccountAdministersThroughIam",
        "FsxLustreDataRepositoriesThroughS3",
    ]


def test_the_registrys_notification_is_eventbridge_only_and_training_adds_none(registry_preview):
    """The registry's BucketNotification replaces the bucket's whole notification configuration on every update,
    so it must be the only owner: EventBridge only, and no training resource that adds notifications (a data
    repository association with automatic import puts its own on the bucket)."""
    training_demo = preview("training-demo")
    notification = one(registry_preview, "aws:s3/bucketNotification:BucketNotification").inputs
    assert set(notification) == {"bucket", "eventbridge"} and notification["eventbridge"] is True
    assert [s for s in training_demo.resources() if s.type == "aws:s3/bucketNotification:BucketNotification"] == []
    associations = [
        s for s in training_demo.resources() if s.type == "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
    ]
    assert associations and not [s for s in associations if (s.inputs.get("s3") or {}).get("autoImportPolicy")]
