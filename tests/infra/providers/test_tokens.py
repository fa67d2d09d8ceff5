"""Every type token mlinfra names exists where it claims to: resources in the installed provider SDKs,
Kubernetes custom resources in their CRDs, functions in the SDKs' invoke modules; and no module outside
infra/providers/tokens.py spells a token itself (a typo there would make a rule or a price silently miss)."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
from pathlib import Path

import yaml

from infra.providers import schema, tokens
from tests.helpers import ROOT

TOKEN = re.compile(r"""["']((?:aws|gcp|kubernetes):[a-zA-Z0-9./]+:[A-Za-z0-9]+)["']""")
SDK = {"aws": "pulumi_aws", "gcp": "pulumi_gcp"}
CRDS = ROOT / "tests" / "data" / "crds"


def _constants() -> dict[str, str]:
    return {name: value for name, value in vars(tokens).items() if name.isupper() and isinstance(value, str)}


def _custom_resource_identities() -> set[tuple[str, str, str]]:
    """Every kept CRD's (group, version, kind): the schemas in tests/data/crds, and Karpenter's identities."""
    found = set()
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))["spec"]
        found |= {(crd["group"], v["name"], crd["names"]["kind"]) for v in crd["versions"]}
    for crd in json.loads((CRDS / "karpenter_identities.json").read_text(encoding="utf-8"))["crds"]:
        found |= {(crd["group"], version, crd["kind"]) for version in crd["versions"]}
    return found


def test_every_resource_token_is_a_resource_of_its_sdk_or_a_known_crd():
    custom = _custom_resource_identities()
    wrong = []
    for name, token in _constants().items():
        if token.rsplit(":", 1)[1][0].islower():
            continue  # a function; see below
        if schema.resource_input_class(token) is not None:
            continue
        group_version, kind = token.split(":")[1:]
        group, _, version = group_version.partition("/")
        if not (schema.is_custom_resource(token) and (group, version, kind) in custom):
            wrong.append(f"{name} = {token}")
    assert wrong == []


def test_every_function_token_is_an_invoke_of_its_sdk():
    wrong = []
    for name, token in _constants().items():
        package, module, function = token.split(":")
        if not function[0].islower():
            continue
        snake = re.sub(r"(?<!^)(?=[A-Z])", "_", function).lower()
        folder = module.split("/")[0]
        where = SDK[package] + ("" if folder == "index" else "." + folder) + "." + snake
        source = Path(importlib.import_module(where).__file__).read_text(encoding="utf-8")
        if f"'{token}'" not in source and f'"{token}"' not in source:
            wrong.append(f"{name} = {token}")
    assert wrong == []


def test_no_module_spells_a_token_itself():
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "infra", "policies", "components", "stacks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    spelled = [
        f"{f}: {m}"
        for f in files
        if f.endswith(".py") and f != "infra/providers/tokens.py"
        if (ROOT / f).exists()
        for m in TOKEN.findall((ROOT / f).read_text(encoding="utf-8"))
        if m != "aws:kms:dsse"
    ]
    assert spelled == []
