"""Hand-written preview documents for cost tests: the shapes `pulumi preview --json` gives, built small."""

from __future__ import annotations

import json
from typing import Any

from infra.tools import preview_json
from tests.helpers import ROOT

DATA = ROOT / "infra" / "catalog" / "data"
STACK = "urn:pulumi:t::mlinfra::pulumi:pulumi:Stack::mlinfra-t"


def prices() -> dict[str, Any]:
    """Instance prices per hour, read straight from the data file (not through the catalog code)."""
    return json.loads((DATA / "aws_prices.json").read_text(encoding="utf-8"))["pricesPerHour"]


def service(key: str) -> float:
    """A service price, read straight from the data file."""
    return json.loads((DATA / "aws_service_prices.json").read_text(encoding="utf-8"))["prices"][key]["usd"]


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:t::mlinfra::{type_}::{name}"


def step(
    type_: str,
    name: str,
    inputs: dict[str, Any] | None = None,
    deps: dict[str, list[str]] | None = None,
    role: str = "training",
    custom: bool = True,
    parent: str = STACK,
) -> dict[str, Any]:
    props = dict(inputs or {})
    if custom:
        props.setdefault("tags", {"mlinfra:role": role, "mlinfra:stack": "t"})
    deps = deps or {}
    return {
        "op": "create",
        "urn": urn(type_, name),
        "newState": {
            "type": type_,
            "urn": urn(type_, name),
            "custom": custom,
            "inputs": props,
            "parent": parent,
            "dependencies": sorted({u for us in deps.values() for u in us}),
            "propertyDependencies": deps,
        },
    }


def document(*steps: dict[str, Any], region: str = "us-east-1") -> preview_json.PreviewDocument:
    stack = {"op": "create", "urn": STACK, "newState": {"type": "pulumi:pulumi:Stack", "urn": STACK, "custom": False}}
    return preview_json.parse({"config": {"aws:region": region}, "steps": [stack, *steps]})


def fleet(instance_type: str, count: int, market: str = "on-demand", volume_gib: int = 200) -> list[dict[str, Any]]:
    """An EC2 Fleet of `count` nodes and its launch template (root volume gp3)."""
    lt_type = "aws:ec2/launchTemplate:LaunchTemplate"
    template = step(
        lt_type,
        "lt",
        {
            "instanceType": instance_type,
            "blockDeviceMappings": [
                {"deviceName": "/dev/sda1", "ebs": {"volumeSize": volume_gib, "volumeType": "gp3"}}
            ],
        },
    )
    nodes = step(
        "aws:ec2/fleet:Fleet",
        "fleet",
        {
            "targetCapacitySpecification": {"defaultTargetCapacityType": market, "totalTargetCapacity": count},
            "launchTemplateConfigs": [{"overrides": [{"instanceType": instance_type}]}],
        },
        deps={"launchTemplateConfigs": [urn(lt_type, "lt")]},
    )
    return [template, nodes]
