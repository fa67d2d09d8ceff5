"""Loading and validating a stack's `mlinfra` config, for both `pulumi up` and the offline preview."""
from __future__ import annotations

import json
from typing import Any, Union

from pydantic import BaseModel, ValidationError

from infra.core.problems import key_path, problems_from
from infra.registry.aws.config import RegistryStackConfig
from infra.training.aws.config import TrainingStackConfig
from infra.training.aws.checks import registry_region_finding, training_findings
from infra.serving.aws.config import ServingStackConfig
from infra.serving.gcp.config import GcpServingStackConfig
from infra.training.gcp.config import GcpTrainingStackConfig
from infra.registry.gcp.config import GcpRegistryStackConfig
from infra.core.errors import InputError, Problem
from infra.core.naming import is_region_name

NAMESPACE = "mlinfra"

# One config model per stack kind; `mlinfra:kind` picks the model.
KINDS: dict[str, type[BaseModel]] = {
    "registry": RegistryStackConfig,
    "training": TrainingStackConfig,
    "serving": ServingStackConfig,
}

# `mlinfra:cloud` (default aws) picks the cloud; GCP has its own model per kind it supports so far.
CLOUDS = ("aws", "gcp")
GCP_KINDS: dict[str, type[BaseModel]] = {"serving": GcpServingStackConfig, "registry": GcpRegistryStackConfig,
                                        "training": GcpTrainingStackConfig}

StackConfig = Union[RegistryStackConfig, TrainingStackConfig, ServingStackConfig, GcpServingStackConfig,
                    GcpRegistryStackConfig, GcpTrainingStackConfig]


def cloud_of(config: BaseModel) -> str:
    return getattr(config, "cloud", "aws")


def validate(values: dict[str, Any]) -> StackConfig:
    """Validate the `mlinfra` namespace (keys without the `mlinfra:` prefix) into the model of its kind."""
    kind = values.get("kind")
    if kind is None:
        raise InputError(Problem(f"{NAMESPACE}:kind", f"required; one of {', '.join(KINDS)}"))
    model = KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise InputError(
            Problem(f"{NAMESPACE}:kind", f"{kind!r} is not a stack kind; allowed: {', '.join(KINDS)}")
        )
    cloud = values.get("cloud", "aws")
    if cloud not in CLOUDS:
        raise InputError(Problem(f"{NAMESPACE}:cloud", f"{cloud!r} is not a cloud; allowed: {', '.join(CLOUDS)}"))
    if cloud == "gcp":
        model = GCP_KINDS.get(kind)
        if model is None:
            raise InputError(Problem(f"{NAMESPACE}:cloud", f"gcp has no {kind} stacks yet (it has: "
                                                           f"{', '.join(GCP_KINDS)}); use aws"))
    else:
        values = {k: v for k, v in values.items() if k != "cloud"}  # aws: the default, may be spelt out
    try:
        return model.model_validate(values)
    except ValidationError as error:
        raise InputError(problems_from(error, model, NAMESPACE)) from None


def namespace_values(flat: dict[str, Any]) -> dict[str, Any]:
    """`{"mlinfra:kind": "registry", "aws:region": ...}` -> `{"kind": "registry"}`; structured values decoded."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        namespace, _, name = key.partition(":")
        if namespace != NAMESPACE:
            continue
        if isinstance(value, str) and value[:1] in ("{", "["):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as error:
                raise InputError(Problem(key_path(NAMESPACE, (name,)), f"not valid JSON: {error.msg}")) from None
        out[name] = value
    return out


def load(flat: dict[str, Any]) -> StackConfig:
    """Validate a stack's whole config (every namespace, as the engine hands it over)."""
    problems = []
    region = flat.get("aws:region")
    if region is not None and not is_region_name(region):
        problems.append(Problem("aws:region", f"must be an AWS region name such as us-east-1 (got {region!r})"))
    try:
        config = validate(namespace_values(flat))
    except InputError as error:
        raise InputError(problems + error.problems) from None
    if cloud_of(config) == "gcp":
        from infra.serving.gcp.checks import gcp_provider_findings

        problems += gcp_provider_findings(flat)
        region = flat.get("gcp:region") if not problems else None
    problems += meaning_findings(config, region if not problems else None)
    if problems:
        raise InputError(problems)
    return config


def meaning_findings(config: StackConfig, region: str | None) -> list[Problem]:
    """Second validation tier: a kind's meaning checks (instance facts, cross-field rules), run once the
    shape is valid. Each finding names its key path, so bad meaning exits 2 like bad shape."""
    if config.kind == "training" and cloud_of(config) == "gcp":
        from infra.training.gcp.checks import gcp_training_findings

        return gcp_training_findings(config.training, region)
    if config.kind == "training":
        return training_findings(config.training, region) + registry_region_finding(config.registry_stack, region)
    if config.kind == "registry" and cloud_of(config) == "gcp":
        from infra.registry.gcp.checks import mirror_findings

        return mirror_findings(config.registry.mirror)
    if config.kind == "serving" and cloud_of(config) == "gcp":
        from infra.serving.gcp.checks import gcp_serving_findings

        return gcp_serving_findings(config.serving, region)
    if config.kind == "serving":
        from infra.serving.aws.checks import serving_findings

        return serving_findings(config.serving, region)
    return []
