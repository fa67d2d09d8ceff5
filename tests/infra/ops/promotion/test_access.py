"""The conversion Jobs' identity (pure): the per-promotion session policy, its size, the converter role's trust."""

from __future__ import annotations

import json
import re

import pytest

from infra.core.errors import InputError
from infra.ops.promotion import jobs, request
from infra.ops.promotion.recipes import VARIANTS
from infra.registry import layout as registry_layout
from infra.serving.aws import converter_access as access
from infra.serving.variants import facts
from tests.infra.ops.promotion.standins import KEY_ARN

BUCKET_ARN = "arn:aws:s3:::mlinfra-registry-promo"
# The longest inputs promote accepts: a 63-character bucket, a GovCloud multi-region key, and the longest
# run id (training runId), model name (serving model name) and version (ModelSpec.version) allowed.
LONGEST = dict(
    bucket_arn="arn:aws-us-gov:s3:::" + "b" * 63,
    key_arn="arn:aws-us-gov:kms:ap-southeast-2:123456789012:key/mrk-" + "0" * 32,
    run_id="r" * 40,
    model="m" * 32,
    version="v" + "9" * 62,
)


def statements(policy: dict) -> dict[str, dict]:
    sids = [s["Sid"] for s in policy["Statement"]]
    assert len(sids) == len(set(sids)), sids
    return {s["Sid"]: s for s in policy["Statement"]}


def test_the_session_policy_reads_the_run_and_writes_one_variant_prefix_exactly():
    policy = statements(access.session_policy(BUCKET_ARN, KEY_ARN, "run-7", "mistral-7b", "v2", "cuda"))
    assert set(policy) == {"RegistryListRead", "RegistryRead", "RegistryKey", "RegistryListWrite", "RegistryWrite"}
    assert policy["RegistryRead"]["Resource"] == [f"{BUCKET_ARN}/checkpoints/run-7/*"]
    assert policy["RegistryWrite"]["Resource"] == [f"{BUCKET_ARN}/models/mistral-7b/v2/cuda/*"]
    assert policy["RegistryListRead"]["Condition"] == {"StringLike": {"s3:prefix": ["checkpoints/run-7/*"]}}
    assert policy["RegistryListWrite"]["Condition"] == {"StringLike": {"s3:prefix": ["models/mistral-7b/v2/cuda/*"]}}
    assert policy["RegistryListRead"]["Resource"] == policy["RegistryListWrite"]["Resource"] == BUCKET_ARN
    # The registry's own documents, merged: the two key statements (same key, same bucket context) become one.
    assert policy["RegistryRead"]["Action"] == registry_layout.READ_ACTIONS
    assert policy["RegistryWrite"]["Action"] == registry_layout.WRITE_ACTIONS
    assert policy["RegistryKey"] == {
        "Sid": "RegistryKey",
        "Effect": "Allow",
        "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
        "Resource": KEY_ARN,
        "Condition": {"StringEquals": {"kms:EncryptionContext:aws:s3:arn": BUCKET_ARN}},
    }


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_session_policy_never_deletes_nor_uses_wildcard_actions(variant):
    policy = access.session_policy(BUCKET_ARN, KEY_ARN, "run-7", "mistral-7b", "v2", variant)
    actions = [a for s in policy["Statement"] for a in s["Action"]]
    assert all(s["Effect"] == "Allow" for s in policy["Statement"])
    assert not [a for a in actions if "Delete" in a or "*" in a]
    assert set(actions) <= {
        *registry_layout.READ_ACTIONS,
        *registry_layout.WRITE_ACTIONS,
        "s3:ListBucket",
        "s3:ListBucketVersions",
        "kms:Decrypt",
        "kms:GenerateDataKey",
    }


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_longest_allowed_names_fit_the_session_policy_limit(variant):
    # promote accepts them (and refuses anything longer: see the next tests)
    calibration = "datasets/calibration/" + "c" * 64 + "/" if facts(variant).calibrated else None  # one whole name
    request.promotion(
        LONGEST["run_id"], LONGEST["model"], LONGEST["version"], variant, "production", "serving-demo",
        evaluation="datasets/evals/e/",  # the quantised variants' quality gate needs it
        calibration=calibration,  # and the calibrated ones their calibration data
    )  # fmt: skip
    text = jobs.session_policy(variant=variant, calibration=calibration, **LONGEST)
    # about 1660 (1930 with a calibration prefix of one whole name): room to spare
    assert len(text) <= access.SESSION_POLICY_LIMIT - (100 if calibration else 300), len(text)
    assert json.loads(text) == access.session_policy(variant=variant, calibration=calibration, **LONGEST)


def test_a_policy_past_the_limit_is_refused():
    with pytest.raises(ValueError, match="session policy is 2[0-9]{3} characters, over the 2048 STS allows"):
        access.packed({"Version": "2012-10-17", "Statement": [{"Sid": "x" * 2048}]})


def test_run_ids_are_training_run_ids():
    with pytest.raises(InputError) as error:
        request.promotion("r" * 41, "mistral-7b", "v2", "cuda", "production", "serving-demo")
    assert str(error.value.problems[0]).startswith("--run-id: a training run id")
    with pytest.raises(InputError):
        request.promotion("Run_7", "mistral-7b", "v2", "cuda", "production", "serving-demo")


def test_session_names_are_valid_and_distinct():
    short = access.session_name("mistral-7b", "2026-03-01", "neuron")
    assert short == "promote-mistral-7b-2026-03-01-neuron"
    a = access.session_name("m" * 32, "v" * 62 + "1", "neuron")
    b = access.session_name("m" * 32, "v" * 62 + "2", "neuron")
    for name in (short, a, b):
        assert re.fullmatch(r"[\w+=,.@-]{2,64}", name), name
    assert a != b


def test_role_names_are_fixed_valid_and_distinct_per_stack():
    assert access.role_name("serving-demo") == "mlinfra-serving-demo-model-converter"
    a, b = access.role_name("serving-" + "x" * 60 + "a"), access.role_name("serving-" + "x" * 60 + "b")
    assert a != b and all(re.fullmatch(r"[\w+=,.@-]{1,64}", n) for n in (a, b))


def test_the_role_trusts_pod_identity_and_itself_only():
    arn = access.role_arn("aws", "123456789012", "mlinfra-serving-demo-model-converter")
    assert arn == "arn:aws:iam::123456789012:role/mlinfra-serving-demo-model-converter"
    pods, self_ = access.trust_policy("aws", "123456789012", arn)["Statement"]
    assert pods == {
        "Effect": "Allow",
        "Principal": {"Service": "pods.eks.amazonaws.com"},
        "Action": ["sts:AssumeRole", "sts:TagSession"],
    }
    assert self_["Principal"] == {"AWS": "arn:aws:iam::123456789012:root"}
    assert self_["Condition"] == {"ArnEquals": {"aws:PrincipalArn": arn}}
    [allow] = access.self_assume_policy(arn)["Statement"]
    assert allow["Resource"] == arn and allow["Action"] == ["sts:AssumeRole", "sts:TagSession"]
