"""The registry bridge, read from what stacks declare: which resources read or write which registry
prefixes, through IAM policies (s3:GetObject / s3:PutObject on `arn:aws:s3:::<bucket>/<prefix>`) and FSx
data repository associations (import from / export to `s3://<bucket>/<prefix>`). Pure."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from infra.core.shapes import as_list, dict_at
from infra.providers import tokens

Mode = Literal["reads", "writes", "imports", "exports"]
WRITE_ACTIONS = {"s3:putobject", "s3:*"}
READ_ACTIONS = {"s3:getobject", "s3:getobjectversion", "s3:*"}
POLICY_PROPS = ("policy", "inlinePolicies")


@dataclass(frozen=True)
class Access:
    urn: str  # the resource that grants or performs the access
    bucket: str
    root: str  # top-level prefix, e.g. "checkpoints/"
    mode: Mode


def accesses(resource_urn: str, resource_type: str, inputs: dict[str, Any], buckets: set[str]) -> list[Access]:
    """The registry accesses one resource declares, for buckets in `buckets`."""
    found: list[Access] = []
    if resource_type == tokens.AWS_FSX_DATA_REPOSITORY_ASSOCIATION:
        path = str(inputs.get("dataRepositoryPath", ""))
        bucket, _, prefix = path.removeprefix("s3://").partition("/")
        s3 = dict_at(inputs, "s3")
        if path.startswith("s3://") and bucket in buckets:
            if s3.get("autoImportPolicy") or inputs.get("batchImportMetaDataOnCreate"):
                found.append(Access(resource_urn, bucket, _root(prefix), "imports"))
            if s3.get("autoExportPolicy"):
                found.append(Access(resource_urn, bucket, _root(prefix), "exports"))
        return found
    for document in _policy_documents(inputs):
        for statement in as_list(document.get("Statement")):
            if not isinstance(statement, dict) or statement.get("Effect") != "Allow":
                continue
            actions = {a.lower() for a in as_list(statement.get("Action")) if isinstance(a, str)}
            modes: list[Mode] = []
            if actions & WRITE_ACTIONS:
                modes.append("writes")
            if actions & READ_ACTIONS - {"s3:*"}:
                modes.append("reads")
            for arn in as_list(statement.get("Resource")):
                if not isinstance(arn, str) or not arn.startswith("arn:aws:s3:::"):
                    continue
                bucket, slash, prefix = arn.removeprefix("arn:aws:s3:::").partition("/")
                if slash and bucket in buckets:
                    # A writer may also read back what it wrote; show it as a writer only.
                    found.extend(Access(resource_urn, bucket, _root(prefix), m) for m in modes[:1])
    return found


def _policy_documents(inputs: dict[str, Any]) -> Iterable[dict[str, Any]]:
    values = [inputs.get("policy")]
    values += [p.get("policy") for p in as_list(inputs.get("inlinePolicies")) if isinstance(p, dict)]
    for value in values:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                continue
        if isinstance(value, dict):
            yield value


def _root(prefix: str) -> str:
    head = prefix.split("/", 1)[0].rstrip("*")
    return f"{head}/" if head else "(whole bucket)"
