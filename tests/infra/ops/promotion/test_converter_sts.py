"""The Jobs' down-scoping request against the moto server's IAM and STS: shape only.

moto checks the syntax of IAM documents (CreatePolicy refuses a malformed one) and the shape of an
AssumeRole request; it does not evaluate trust, identity or session policies (any caller may assume any
role there, even one that does not exist), nor the 2048-character and packed-size limits of a session
policy (test_access.py tests the former; only STS computes the latter). What this proves: the documents
are well-formed IAM, and the exact request a Job's credential process sends is one STS accepts, whose
answer the AWS CLI's --query turns into what a credential_process must print.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime

import jmespath
import pytest
from botocore.credentials import ProcessProvider, RefreshableCredentials

from infra.ops.promotion import jobs
from infra.ops.promotion.recipes import RECIPES
from infra.ops.promotion.sizing import Resources
from infra.serving.aws import converter_access as access
from infra.serving.spec import ModelSpec
from tests.infra.ops.promotion.standins import BUCKET, KEY_ARN, credential_process_argv

ACCOUNT = "123456789012"  # moto's account
ROLE = access.role_name("serving-demo")
ROLE_ARN = access.role_arn("aws", ACCOUNT, ROLE)
LONGEST = dict(run_id="r" * 40, model="m" * 32, version="v" + "9" * 62, variant="neuron")


@pytest.fixture
def converter_role(aws):
    """The converter role as the serving stack declares it, with its self-assume policy."""
    trust = access.trust_policy("aws", ACCOUNT, ROLE_ARN)
    aws.iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument=json.dumps(trust), MaxSessionDuration=3600)
    aws.iam.put_role_policy(
        RoleName=ROLE, PolicyName="self-assume", PolicyDocument=json.dumps(access.self_assume_policy(ROLE_ARN))
    )
    return ROLE_ARN


def _job(**names):
    return jobs.conversion_job(
        bucket=BUCKET,
        bucket_arn=f"arn:aws:s3:::{BUCKET}",
        key_arn=KEY_ARN,
        role_arn=ROLE_ARN,
        region="us-east-1",
        ns="models",
        checkpoint=f"checkpoints/{names['run_id']}/step-9/",
        resources=Resources(2, 21, 37, 1),
        server=ModelSpec.model_validate(
            {
                "name": names["model"],
                "version": "v1",
                "accelerator": RECIPES[names["variant"]].accelerator,
                "image": RECIPES[names["variant"]].default_image,
            }
        ),
        **names,
    )


@pytest.mark.parametrize(
    "names",
    [dict(run_id="llama-ft-007", model="mistral-7b", version="v2", variant="cuda"), LONGEST],
    ids=["demo", "longest"],
)
def test_sts_accepts_the_jobs_assume_role_request(aws, converter_role, names):
    argv = credential_process_argv(_job(**names))
    options = dict(zip(argv[7::2], argv[8::2], strict=True))
    # The session policy is well-formed IAM (moto validates a managed policy's document like IAM does).
    aws.iam.create_policy(PolicyName="session-policy-shape", PolicyDocument=options["--policy"])
    sts = aws.session.client("sts")
    answer = sts.assume_role(
        RoleArn=options["--role-arn"],
        RoleSessionName=options["--role-session-name"],
        DurationSeconds=int(options["--duration-seconds"]),
        Policy=options["--policy"],
    )
    assert answer["AssumedRoleUser"]["Arn"] == (
        f"arn:aws:sts::{ACCOUNT}:assumed-role/{ROLE}/{options['--role-session-name']}"
    )
    # What the CLI prints with the Job's --query (it renders timestamps as ISO 8601) ...
    printed = jmespath.search(options["--query"], _as_cli_json(answer))
    assert printed["Version"] == 1 and printed["AccessKeyId"] == answer["Credentials"]["AccessKeyId"]
    # ... is what botocore's credential_process provider reads, with an expiry it refreshes before.
    command = f"{sys.executable} -c 'print({json.dumps(json.dumps(printed))})'"
    provider = ProcessProvider("default", lambda: {"profiles": {"default": {"credential_process": command}}})
    credentials = provider.load()
    assert credentials.access_key == answer["Credentials"]["AccessKeyId"]
    assert isinstance(credentials, RefreshableCredentials) and not credentials.refresh_needed()


def test_the_trust_and_self_assume_documents_are_well_formed(aws, converter_role):
    # The explicit Deny on aliases and version claims is well-formed IAM too.
    aws.iam.put_role_policy(
        RoleName=ROLE,
        PolicyName="deny-promotion-objects",
        PolicyDocument=json.dumps(access.promotion_objects_deny(f"arn:aws:s3:::{BUCKET}")),
    )
    role = aws.iam.get_role(RoleName=ROLE)["Role"]
    assert role["Arn"] == ROLE_ARN  # the fixed name gives the ARN the trust policy names
    document = role["AssumeRolePolicyDocument"]
    trust = json.loads(document) if isinstance(document, str) else document
    assert trust == access.trust_policy("aws", ACCOUNT, ROLE_ARN)


def _as_cli_json(answer: dict) -> dict:
    return json.loads(json.dumps(answer, default=lambda v: v.isoformat() if isinstance(v, datetime) else str(v)))


def test_the_credential_process_script_is_valid_shell():
    script = _job(**LONGEST)["spec"]["template"]["spec"]["initContainers"][0]["command"][-1]
    assert subprocess.run(["/bin/sh", "-n", "-c", script], capture_output=True).returncode == 0


def test_sts_accepts_the_evaluation_jobs_assume_role_request(aws, converter_role):
    from infra.ops.promotion import evaluation

    job = evaluation.evaluation_job(
        bucket=BUCKET,
        bucket_arn=f"arn:aws:s3:::{BUCKET}",
        key_arn=KEY_ARN,
        role_arn=ROLE_ARN,
        region="us-east-1",
        ns="models",
        checkpoint=f"checkpoints/{LONGEST['run_id']}/step-9/",
        checkpoint_bytes=1 << 30,
        evaluation="datasets/evals/" + "e" * 64 + "/",
        model=LONGEST["model"],
        version=LONGEST["version"],
        variant="cuda-int4",
        run_id=LONGEST["run_id"],
        converter_image="123456789012.dkr.ecr.us-east-1.amazonaws.com/mlinfra-converter:0.33.0-llmc0.14.0.1",
        server=ModelSpec.model_validate(
            {"name": LONGEST["model"], "version": "v1", "accelerator": "g5", "image": RECIPES["cuda"].default_image}
        ),
    )
    argv = credential_process_argv(job)
    options = dict(zip(argv[7::2], argv[8::2], strict=True))
    aws.iam.create_policy(PolicyName="evaluation-session-policy-shape", PolicyDocument=options["--policy"])
    answer = aws.session.client("sts").assume_role(
        RoleArn=options["--role-arn"],
        RoleSessionName=options["--role-session-name"],
        DurationSeconds=int(options["--duration-seconds"]),
        Policy=options["--policy"],
    )
    assert answer["AssumedRoleUser"]["Arn"].endswith(f"/{options['--role-session-name']}")
    assert options["--role-session-name"].startswith("evaluate-") and len(options["--role-session-name"]) <= 64
