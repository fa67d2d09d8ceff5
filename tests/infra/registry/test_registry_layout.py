import pytest

from infra.registry import layout

BUCKET = "arn:aws:s3:::reg"
KEY = "arn:aws:kms:us-east-1:123456789012:key/k"


def actions(document: dict) -> set[str]:
    return {a for s in document["Statement"] for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}


def test_prefix_builders_follow_the_layout():
    assert layout.checkpoints_prefix("run-7") == "checkpoints/run-7/"
    assert layout.runs_prefix("run-7") == "runs/run-7/"
    assert layout.model_prefix("llama", "3", "neuron") == "models/llama/3/neuron/"
    assert layout.model_prefix("llama") == "models/llama/"


@pytest.mark.parametrize(
    "prefix, problem",
    [
        ("datasets", "must end with '/'"),
        ("tmp/", "must start with one of datasets/, checkpoints/, models/, runs/"),
        ("models/*/", "segment '*' must be letters, digits, '.', '_', '=' or '-' (no wildcards, no '..')"),
        ("checkpoints/../", "segment '..' must be letters, digits, '.', '_', '=' or '-' (no wildcards, no '..')"),
    ],
)
def test_bad_prefixes_are_refused(prefix, problem):
    assert layout.prefix_problem(prefix) == problem


def test_read_grant_reads_only_its_prefix_and_never_writes():
    doc = layout.read_policy(BUCKET, KEY, ["models/llama/3/neuron/"])
    assert actions(doc) == {
        "s3:ListBucket",
        "s3:ListBucketVersions",
        "s3:GetObject",
        "s3:GetObjectVersion",
        "s3:GetObjectTagging",
        "kms:Decrypt",
    }
    read = next(s for s in doc["Statement"] if s["Sid"] == "RegistryRead")
    assert read["Resource"] == [f"{BUCKET}/models/llama/3/neuron/*"]
    listing = next(s for s in doc["Statement"] if s["Sid"] == "RegistryList")
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["models/llama/3/neuron/*"]}}


def test_write_grant_cannot_delete_anything():
    doc = layout.write_policy(BUCKET, KEY, ["checkpoints/r1/", "models/"])
    assert not any("Delete" in a or a.endswith("*") for a in actions(doc))
    assert "s3:PutObject" in actions(doc) and "kms:GenerateDataKey" in actions(doc)


def test_kms_use_is_pinned_to_the_bucket():
    for doc in (layout.read_policy(BUCKET, KEY, ["datasets/"]), layout.write_policy(BUCKET, KEY, ["models/"])):
        kms = next(s for s in doc["Statement"] if s["Sid"] == "RegistryKey")
        assert kms["Resource"] == KEY
        assert kms["Condition"] == {"StringEquals": {"kms:EncryptionContext:aws:s3:arn": BUCKET}}


def test_tls_only_policy_denies_plain_http_and_old_tls_on_bucket_and_objects():
    doc = layout.tls_only_bucket_policy(BUCKET)
    assert {s["Effect"] for s in doc["Statement"]} == {"Deny"}
    assert doc["Statement"][0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert doc["Statement"][1]["Condition"] == {"NumericLessThan": {"s3:TlsVersion": "1.2"}}
    assert all(s["Resource"] == [BUCKET, f"{BUCKET}/*"] for s in doc["Statement"])


def test_grants_refuse_bad_prefixes():
    with pytest.raises(ValueError, match="must start with one of"):
        layout.read_policy(BUCKET, KEY, ["secrets/"])


def test_registry_key_policy_lets_only_fsx_s3_roles_of_the_account_use_the_key_through_s3():
    from infra.registry.layout import registry_key_policy

    policy = registry_key_policy("123456789012", "aws", "us-east-1")
    admin, fsx = policy["Statement"]
    assert admin["Principal"] == {"AWS": "arn:aws:iam::123456789012:root"} and admin["Action"] == "kms:*"
    assert "kms:*" not in fsx["Action"] and "kms:CreateGrant" not in fsx["Action"]
    assert fsx["Condition"] == {
        "ArnLike": {
            "aws:PrincipalArn": "arn:aws:iam::123456789012:role/aws-service-role/"
            "s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_*"
        },
        "StringEquals": {"kms:CallerAccount": "123456789012", "kms:ViaService": "s3.us-east-1.amazonaws.com"},
    }
