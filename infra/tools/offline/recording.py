"""Pulumi's mock runtime, extended to record what a real engine would see and to act as the provider.

`RecordingMonitor` keeps every registration with its options (parent, protect, retainOnDelete,
dependencies); `OfflineMocks` answers resources with plausible computed outputs, StackReferences
with the referenced stack's offline outputs, and invokes with the documented offline values.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks, rpc
from pulumi.runtime.settings import get_project, get_stack
from pulumi.runtime.sync_await import _ensure_event_loop

from infra.providers import tokens
from infra.providers.schema import has_input
from infra.tools.offline import invokes


@dataclass
class Registration:
    urn: str
    type: str
    name: str
    custom: bool
    parent: str
    inputs: dict[str, Any]
    protect: bool
    retain_on_delete: bool
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    op: str = "create"  # "read" for resources read by id (StackReference)
    outputs: dict[str, Any] = field(default_factory=dict)
    alias_types: tuple[str, ...] = ()  # former type tokens the resource answers to (its aliases' types)
    custom_timeouts: dict[str, str] = field(default_factory=dict)  # create/update/delete, as set


@dataclass
class Diagnostic:
    severity: str  # "error" | "warning" | "info"
    message: str
    urn: str = ""


class RecordingMonitor(mocks.MockMonitor):
    def __init__(self, mocks_: OfflineMocks):
        super().__init__(mocks_)
        self.offline_mocks = mocks_
        self.registrations: list[Registration] = []
        # Registrations arrive on several worker threads: the duplicate check must see every earlier one.
        self._claimed: set[str] = set()
        self._claim_lock = threading.Lock()

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        # As the engine does: a child's type is qualified by its parent's whole chain, except the root stack.
        if parent:
            qualified = parent.split("::")[2]
            if qualified != "pulumi:pulumi:Stack":
                type_ = f"{qualified}${type_}"
        return "urn:pulumi:" + "::".join([get_stack(), get_project(), type_, name])

    def RegisterResource(self, request):
        _ensure_event_loop()
        urn = self.make_urn(request.parent, request.type, request.name)
        with self._claim_lock:
            duplicate = urn in self._claimed
            self._claimed.add(urn)
        if request.type != "pulumi:pulumi:Stack" and duplicate:
            self.offline_mocks.diagnostics.append(
                Diagnostic("error", f"duplicate resource URN {urn}; give each resource a unique name", urn)
            )
        response = super().RegisterResource(request)
        state = self.resources[urn].state if urn in self.resources else {}
        self.registrations.append(
            Registration(
                urn=urn,
                type=request.type,
                name=request.name,
                custom=bool(request.custom),
                parent=request.parent,
                inputs=_plain(rpc.deserialize_properties(request.object))
                if request.type != "pulumi:pulumi:Stack"
                else {},
                protect=bool(request.protect),
                retain_on_delete=bool(request.retainOnDelete),
                dependencies=list(request.dependencies),
                property_dependencies={k: list(v.urns) for k, v in request.propertyDependencies.items()},
                outputs=dict(state),
                alias_types=tuple(a.spec.type for a in request.aliases if a.HasField("spec") and a.spec.type),
                custom_timeouts={
                    op: getattr(request.customTimeouts, op)
                    for op in ("create", "update", "delete")
                    if getattr(request.customTimeouts, op)
                },
            )
        )
        return response

    def ReadResource(self, request):
        response = super().ReadResource(request)
        urn = response.urn
        self.registrations.append(
            Registration(
                urn=urn,
                type=request.type,
                name=request.name,
                custom=True,
                parent=request.parent,
                inputs=_plain(rpc.deserialize_properties(request.properties)),
                protect=False,
                retain_on_delete=False,
                dependencies=list(request.dependencies),
                property_dependencies={},
                op="read",
                outputs=dict(self.resources[urn].state),
            )
        )
        return response


def _plain(value: Any) -> Any:
    """Wire values as JSON shows them: protobuf carries every number as a double, so 30.0 -> 30;
    assets and archives in the engine's signature form, with content hashes."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, (pulumi.Asset, pulumi.Archive)):
        return _asset_json(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _asset_json(value: Any) -> dict[str, Any]:
    """An asset or archive as the engine puts it on the wire (signature key), plus a content hash."""
    if isinstance(value, pulumi.AssetArchive):
        assets = {name: _asset_json(asset) for name, asset in sorted(value.assets.items())}
        digest = hashlib.sha256(json.dumps({k: v.get("hash") for k, v in assets.items()}).encode()).hexdigest()
        return {rpc._special_sig_key: rpc._special_archive_sig, "assets": assets, "hash": digest}
    if isinstance(value, pulumi.StringAsset):
        return {
            rpc._special_sig_key: rpc._special_asset_sig,
            "text": value.text,
            "hash": hashlib.sha256(value.text.encode()).hexdigest(),
        }
    sig = rpc._special_archive_sig if isinstance(value, pulumi.Archive) else rpc._special_asset_sig
    out = {rpc._special_sig_key: sig, "path": value.path}
    if isinstance(value, pulumi.FileAsset):
        out["hash"] = hashlib.sha256(Path(value.path).read_bytes()).hexdigest()
    return out


class OfflineMocks(mocks.Mocks):
    def __init__(self, config: dict[str, Any], resolve_stack: Callable[[str], dict[str, Any]]):
        self.config = config
        self.resolve_stack = resolve_stack
        self.diagnostics: list[Diagnostic] = []
        self._reported_invokes: set[str] = set()

    def call(self, args: mocks.MockCallArgs):
        found = invokes.answer(args.token, self.config, args.args)
        if found is None:
            self.diagnostics.append(
                Diagnostic(
                    "error",
                    f"offline preview has no value for function {args.token}; "
                    "add one to infra/tools/offline/invokes.py",
                )
            )
            return {}, []
        result, description = found
        if args.token not in self._reported_invokes:
            self._reported_invokes.add(args.token)
            self.diagnostics.append(Diagnostic("info", f"offline value for {args.token}: {description}"))
        return result, []

    def new_resource(self, args: mocks.MockResourceArgs):
        if args.typ == "pulumi:pulumi:StackReference":
            target = str(args.inputs.get("name") or args.resource_id)
            return target, {"name": target, "outputs": self.resolve_stack(target), "secretOutputNames": []}
        outputs = {**args.inputs, **computed_outputs(args.typ, args.name, args.inputs, self.config)}
        if args.typ in RESOURCE_PATH_IDS and outputs.get("id"):
            return outputs["id"], outputs  # ids other resources name as resource paths (a CMEK, a topic)
        return _offline_id(args), outputs


# Resources whose id is the resource path that other resources name (a bucket's CMEK, a notification's topic).
RESOURCE_PATH_IDS = frozenset(
    {tokens.GCP_KMS_KEY_RING, tokens.GCP_KMS_CRYPTO_KEY, tokens.GCP_PUBSUB_TOPIC, tokens.GCP_CLOUDFUNCTIONSV2_FUNCTION}
)


def _short_hash(text: str, length: int = 7) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _offline_id(args: mocks.MockResourceArgs) -> str:
    if args.typ == tokens.AWS_S3_BUCKET and args.inputs.get("bucket"):
        return args.inputs["bucket"]
    return f"{args.name}-{_short_hash(args.typ + args.name, 8)}"


# Resources whose ARN does not follow arn:aws:<token module>:<region>:<account>:<type>/<name>.
_ARN_FORMATS = {
    tokens.AWS_LAMBDA_FUNCTION: "arn:aws:lambda:{region}:{account}:function:{name}",
    tokens.AWS_CLOUDWATCH_EVENT_RULE: "arn:aws:events:{region}:{account}:rule/{name}",
    tokens.AWS_CLOUDWATCH_LOG_GROUP: "arn:aws:logs:{region}:{account}:log-group:{name}",
    tokens.AWS_SCHEDULER_SCHEDULE: "arn:aws:scheduler:{region}:{account}:schedule/default/{name}",
    tokens.AWS_SQS_QUEUE: "arn:aws:sqs:{region}:{account}:{name}",
    tokens.AWS_RESOURCEGROUPS_GROUP: "arn:aws:resource-groups:{region}:{account}:group/{name}",
}


def computed_outputs(token: str, name: str, inputs: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """Plausible values for outputs the provider computes, so dependent inputs are readable offline."""
    if token.startswith("gcp:"):
        from infra.tools.offline.outputs_gcp import gcp_outputs

        return gcp_outputs(token, name, inputs, config)
    if not token.startswith("aws:"):
        return {}
    region = config.get("aws:region", "us-east-1")
    account = invokes.OFFLINE_ACCOUNT_ID
    service = token.split(":")[1].split("/")[0]
    out: dict[str, Any] = {}
    physical = inputs.get("name") or f"{name}-{_short_hash(token + name)}"
    if token == tokens.AWS_S3_BUCKET:
        physical = inputs.get("bucket") or f"{name}-{_short_hash(name)}"
        out.update(bucket=physical, arn=f"arn:aws:s3:::{physical}", bucketDomainName=f"{physical}.s3.amazonaws.com")
    elif token == tokens.AWS_KMS_KEY:
        key_id = f"{_short_hash(name, 8)}-0000-4000-8000-{_short_hash(token + name, 12)}"
        out.update(keyId=key_id, arn=f"arn:aws:kms:{region}:{account}:key/{key_id}")
    elif token == tokens.AWS_FSX_LUSTRE_FILE_SYSTEM:
        fs_id = f"fs-0{_short_hash(name, 16)}"
        out.update(
            id=fs_id,
            dnsName=f"{fs_id}.fsx.{region}.amazonaws.com",
            mountName=_short_hash(token + name, 8),
            arn=f"arn:aws:fsx:{region}:{account}:file-system/{fs_id}",
        )
    elif token == tokens.AWS_EC2_LAUNCH_TEMPLATE:
        out.update(latestVersion=1, defaultVersion=1)
    elif token == tokens.AWS_EC2_FLEET:
        # An instant fleet reports the instances it launched: one offline id per unit of capacity.
        count = int((inputs.get("targetCapacitySpecification") or {}).get("totalTargetCapacity") or 0)
        ids = [f"i-0{_short_hash(f'{name}-{n}', 16)}" for n in range(count)]
        out["fleetInstanceSets"] = (
            [{"instanceIds": ids, "instanceType": _fleet_instance_type(inputs), "lifecycle": "on-demand"}]
            if ids
            else []
        )
    elif token in _ARN_FORMATS:
        out["arn"] = _ARN_FORMATS[token].format(region=region, account=account, name=physical)
    elif service == "iam":
        kind = token.rsplit(":", 1)[1].lower()
        out.update(arn=f"arn:aws:iam::{account}:{kind}/{physical}", name=physical)
    else:
        out["arn"] = f"arn:aws:{service}:{region}:{account}:{token.rsplit(':', 1)[1].lower()}/{physical}"
    if "name" not in inputs and "name" not in out and has_input(token, "name"):
        out["name"] = physical  # the provider's auto-name (name + random suffix)
    if "tags" in inputs:
        out["tagsAll"] = inputs["tags"]
    return out


def _fleet_instance_type(inputs: dict[str, Any]) -> str | None:
    for config in inputs.get("launchTemplateConfigs") or []:
        for override in config.get("overrides") or []:
            if override.get("instanceType"):
                return override["instanceType"]
    return None
