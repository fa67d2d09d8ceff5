"""The conversion Jobs' AWS identity (pure): one converter role per serving stack, down-scoped per promotion.

The serving stack declares the role once (components/serving/aws/model_converter.py): EKS Pod Identity hands it to
the `model-converter` service account, and it holds the registry's own grants, read on checkpoints/
and write on models/ (never delete). Each conversion Job then assumes that same role again (role
chaining) with a session policy naming only its promotion's prefixes: read checkpoints/<run-id>/ (and, for a
calibrated variant, its datasets/calibration/<name>/), write models/<name>/<version>/<variant>/. A session's
rights are the intersection of the role's policies and the session policy, so the Job's effective rights are
exactly those prefixes.

Role chaining caps a session at one hour and a Job may run for hours, so the down-scoped credentials
are not written once: the Job's `credentials` step is a sidecar (a restartable init container) that holds the
pod's own credentials and assumes the role again, with the same session policy, every REFRESH_SECONDS into an
in-memory volume. The S3 steps get no credentials of the pod (Pod Identity skips them): their AWS CLI config
names a `credential_process` that only prints the sidecar's latest session.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from typing import Any

from infra.core.naming import slug
from infra.registry import layout as registry_layout
from infra.serving.aws import iam

SERVICE_ACCOUNT = "model-converter"
SESSION_POLICY_LIMIT = 2048  # characters of an inline session policy (STS AssumeRole, `Policy`)
SESSION_SECONDS = 3600  # the most a chained role session may last
CREDENTIALS_DIR = "/aws"  # in-memory volume: the AWS CLI config and its credential process
CONFIG_FILE = f"{CREDENTIALS_DIR}/config"
PROCESS_FILE = f"{CREDENTIALS_DIR}/assume-role.sh"
SESSION_FILE = f"{CREDENTIALS_DIR}/session.json"  # the latest down-scoped session, credential_process JSON
READY_FILE = f"{CREDENTIALS_DIR}/ready"  # written once the first assume has succeeded or failed
FAILED_FILE = f"{CREDENTIALS_DIR}/failed"  # why the first assume failed: the S3 steps then fail at once
# The sidecar re-assumes 40 minutes into each one-hour session: the CLI refreshes credentials that have less
# than 15 minutes left (botocore's advisory window), and then finds a session with at least 20 to go.
REFRESH_SECONDS = 2400
QUALITY_FILE = "quality.json"  # the one object an evaluation Job writes (infra/ops/promotion/quality.py reads it)
RETRY_SECONDS = 30
_SESSION_NAME_MAX = 64  # RoleSessionName: 2-64 of [\w+=,.@-]
_ROLE_NAME_MAX = 64


def role_name(stack: str) -> str:
    """Fixed name of the stack's converter role, so its ARN is known before it exists (self-trust, no cycle)."""
    name = f"mlinfra-{slug(stack, _ROLE_NAME_MAX)}-model-converter"
    if len(name) <= _ROLE_NAME_MAX and slug(stack, _ROLE_NAME_MAX) == stack:
        return name
    return _bounded(name, _ROLE_NAME_MAX, stack)


def role_arn(partition: str, account_id: str, name: str) -> str:
    return f"arn:{partition}:iam::{account_id}:role/{name}"


def trust_policy(partition: str, account_id: str, arn: str) -> dict[str, Any]:
    """EKS Pod Identity may hand the role to pods; the role may assume itself (to down-scope its sessions).

    The account root as principal delegates the decision to the caller's identity policies, and the
    condition admits only sessions of this role (aws:PrincipalArn of an assumed-role session is its
    role's ARN). sts:TagSession: Pod Identity's session tags are transitive, so a chained assume carries
    them on unless the association disables them (it does; kept so re-enabling tags does not break Jobs).
    """
    trust = iam.pod_identity_trust()
    trust["Statement"].append(
        {
            "Sid": "SelfAssumeToDownScope",
            "Effect": "Allow",
            "Principal": {"AWS": f"arn:{partition}:iam::{account_id}:root"},
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            "Condition": {"ArnEquals": {"aws:PrincipalArn": arn}},
        }
    )
    return trust


def self_assume_policy(arn: str) -> dict[str, Any]:
    """The identity side of the self-assume (the trust names the account, so both sides must allow it)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "SelfAssumeToDownScope",
                "Effect": "Allow",
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Resource": arn,
            }
        ],
    }


def promotion_objects_deny(bucket_arn: str) -> dict[str, Any]:
    """An explicit Deny on the converter role: no Job (nor anything else holding the role) moves an alias,
    claims a version, writes the manifest that makes an artefact servable or the _FAILED marker that keeps it
    from being served; `promote` does all of that with its caller's own credentials, after checking what
    the Job wrote. An explicit Deny wins over the role's write grant on models/ and over any session policy.
    (S3 ARN wildcards match across '/', so models/*/manifest.json is every depth.)"""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "DenyPromotionObjects",
                "Effect": "Deny",
                "Action": ["s3:PutObject"],
                "Resource": [
                    f"{bucket_arn}/models/*/aliases/*",
                    f"{bucket_arn}/models/*/*/_PROMOTION",
                    f"{bucket_arn}/models/*/manifest.json",
                    f"{bucket_arn}/models/*/_FAILED",
                ],
            }
        ],
    }


def service_account(ns: str) -> dict[str, Any]:
    # No annotations: the Pod Identity association maps it to the converter role on the AWS side.
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": SERVICE_ACCOUNT,
            "namespace": ns,
            "labels": {"app.kubernetes.io/name": "model-conversion", "app.kubernetes.io/managed-by": "mlinfra"},
        },
        "automountServiceAccountToken": False,
    }


def session_policy(
    bucket_arn: str,
    key_arn: str,
    run_id: str,
    model: str,
    version: str,
    variant: str,
    calibration: str | None = None,
) -> dict[str, Any]:
    """Read the run's checkpoints (and the calibration data, datasets/calibration/<name>/, of a variant whose
    quantiser reads it), write the one variant prefix: the registry's own read and write policies, merged into
    one document (registry_layout.read_policy grants the data prefixes, as the evaluation Job's does)."""
    reads = [registry_layout.checkpoints_prefix(run_id)] + ([calibration] if calibration is not None else [])
    return merge_policies(
        {
            "Read": registry_layout.read_policy(bucket_arn, key_arn, reads),
            "Write": registry_layout.write_policy(
                bucket_arn, key_arn, [registry_layout.model_prefix(model, version, variant)]
            ),
        }
    )


def evaluation_session_policy(bucket_arn: str, key_arn: str, reads: list[str], writes: list[str]) -> dict[str, Any]:
    """An evaluation Job's session: read `reads` (prefixes: the reference checkpoint or the variant's artefact,
    the evaluation data, the reference's figures), write exactly the objects `writes` (the variant's quality.json;
    the reference's figures): nothing else, not the artefact it judges."""
    read = registry_layout.read_policy(bucket_arn, key_arn, reads)
    write = {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "RegistryWriteResults", "Effect": "Allow", "Action": ["s3:PutObject"],
             "Resource": [f"{bucket_arn}/{key}" for key in writes]},
            {"Sid": "RegistryKey", "Effect": "Allow", "Action": ["kms:GenerateDataKey"], "Resource": key_arn,
             "Condition": {"StringEquals": {"kms:EncryptionContext:aws:s3:arn": bucket_arn}}},
        ],
    }  # fmt: skip
    return merge_policies({"Read": read, "Write": write})


def packed(policy: dict[str, Any]) -> str:
    """The policy as sent: compact JSON; ValueError past the session policy limit."""
    text = json.dumps(policy, separators=(",", ":"))
    if len(text) > SESSION_POLICY_LIMIT:
        raise ValueError(f"session policy is {len(text)} characters, over the {SESSION_POLICY_LIMIT} STS allows")
    return text


def merge_policies(named: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One document of every statement in `named`. Statements equal but for their actions become one (actions
    joined, in order); other statements whose Sid collides get their document's name appended."""
    merged: list[tuple[dict[str, Any], set[str]]] = []
    for name, document in named.items():
        for statement in document["Statement"]:
            rest = {k: v for k, v in statement.items() if k != "Action"}
            same = next((m for m, _ in merged if {k: v for k, v in m.items() if k != "Action"} == rest), None)
            if same is not None:
                same["Action"] = same["Action"] + [a for a in statement["Action"] if a not in same["Action"]]
                continue
            merged.append(({**statement, "Action": list(statement["Action"])}, {name}))
    sids = [m.get("Sid") for m, _ in merged]
    for statement, names in merged:
        if statement.get("Sid") and sids.count(statement["Sid"]) > 1:
            statement["Sid"] += "".join(sorted(names))
    return {"Version": "2012-10-17", "Statement": [m for m, _ in merged]}


def session_name(model: str, version: str, variant: str) -> str:
    """promote-<model>-<version>-<variant>, shortened with a hash past the 64 characters STS allows."""
    return _bounded(f"promote-{model}-{version}-{variant}", _SESSION_NAME_MAX)


def evaluation_session_name(model: str, version: str, variant: str) -> str:
    """evaluate-<model>-<version>-<variant>, shortened like session_name."""
    return _bounded(f"evaluate-{model}-{version}-{variant}", _SESSION_NAME_MAX)


def credential_process(arn: str, name: str, policy_json: str) -> str:
    """Shell: assume the converter role with the session policy, print credential_process JSON.

    It runs with the pod's own (Pod Identity) credentials: no config file, so the CLI falls through to
    the container credentials Pod Identity sets up, instead of calling itself."""
    query = (
        "{Version: `1`, AccessKeyId: Credentials.AccessKeyId, SecretAccessKey: Credentials.SecretAccessKey, "
        "SessionToken: Credentials.SessionToken, Expiration: Credentials.Expiration}"
    )
    return (
        "exec env AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null "
        f"aws sts assume-role --role-arn {shlex.quote(arn)} --role-session-name {shlex.quote(name)} "
        f"--duration-seconds {SESSION_SECONDS} --policy {shlex.quote(policy_json)} "
        f"--output json --query {shlex.quote(query)}"
    )


def credentials_script(arn: str, name: str, policy_json: str) -> str:
    """The Job's credentials sidecar: write the assume command and the S3 steps' CLI config, assume once and
    prove the session (`get-caller-identity`), mark the result, then re-assume every REFRESH_SECONDS until the
    pod ends. A first assume that fails is written to FAILED_FILE, which makes `fetch` fail the pod at once."""
    new = f"{SESSION_FILE}.new"
    assume = f"/bin/sh {PROCESS_FILE} > {new} && mv {new} {SESSION_FILE}"
    return (
        "set -u\numask 077\ntrap 'exit 0' TERM\n"
        f"cat > {PROCESS_FILE} <<'MLINFRA_EOF'\n{credential_process(arn, name, policy_json)}\nMLINFRA_EOF\n"
        f"cat > {CONFIG_FILE} <<'MLINFRA_EOF'\n[default]\ncredential_process = /bin/cat {SESSION_FILE}\n"
        "MLINFRA_EOF\n"
        f'if {assume} && arn="$(env -u AWS_CONTAINER_CREDENTIALS_FULL_URI -u AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE '
        f'AWS_CONFIG_FILE={CONFIG_FILE} aws sts get-caller-identity --output text --query Arn)"; then\n'
        '  echo "registry access: $arn"\n'
        "else\n"
        f"  echo 'cannot assume {arn} with the session policy of this promotion' > {FAILED_FILE}\n"
        f"  cat {FAILED_FILE} >&2\n"
        "fi\n"
        f": > {READY_FILE}\n"
        "while :; do\n"
        f"  if [ -e {FAILED_FILE} ]; then sleep 3600 & wait $!; continue; fi\n"
        f"  sleep ${{MLINFRA_REFRESH_SECONDS:-{REFRESH_SECONDS}}} & wait $!\n"
        f"  until {assume}; do echo 'refresh failed; retrying' >&2; sleep {RETRY_SECONDS} & wait $!; done\n"
        "done\n"
    )


def s3_step(command: str) -> str:
    """An S3 step's shell: fail at once when the sidecar could not assume the role; run with no credentials of
    the pod (Pod Identity skips the step; the unset is a second guard), only the down-scoped session."""
    return (
        "set -eu\nunset AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE\n"
        f"if [ -e {FAILED_FILE} ]; then cat {FAILED_FILE} >&2; exit 1; fi\n"
        f"{command}\n"
    )


def _bounded(text: str, limit: int, source: str = "") -> str:
    """`text`, or its first characters and a hash of `source` (default: `text`) when it is too long or
    `source` was changed to make it."""
    if len(text) <= limit and not source:
        return text
    digest = hashlib.sha256((source or text).encode()).hexdigest()[:6]
    return f"{text[: limit - 7].rstrip('-')}-{digest}"
