"""The one (kind, cloud) table: for each stack kind on each cloud, its config model, its meaning checks and
the stack module that builds it. Loading a stack's config goes through it, for `pulumi up` and the offline
preview alike: provider keys, then shape (pydantic), then meaning, every problem naming its key."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from infra.catalog import provider_config
from infra.catalog.gcp.regions import region_problem
from infra.core.errors import InputError, Problem
from infra.core.namespace import NAMESPACE, namespace_values
from infra.core.problems import problems_from
from infra.core.providers import aws_provider_findings, gcp_provider_findings
from infra.core.spec import Spec
from infra.registry.aws.config import RegistryStackConfig
from infra.registry.gcp.checks import mirror_findings
from infra.registry.gcp.config import GcpRegistryStackConfig
from infra.registry.reference import registry_stack_findings
from infra.serving.aws.checks import serving_findings
from infra.serving.aws.config import ServingStackConfig
from infra.serving.gcp.checks import gcp_serving_findings
from infra.serving.gcp.config import GcpServingStackConfig
from infra.training.aws.checks import registry_region_finding, training_findings
from infra.training.aws.config import TrainingStackConfig
from infra.training.gcp.checks import gcp_training_findings
from infra.training.gcp.config import GcpTrainingStackConfig

StackConfig = (
    RegistryStackConfig
    | TrainingStackConfig
    | ServingStackConfig
    | GcpServingStackConfig
    | GcpRegistryStackConfig
    | GcpTrainingStackConfig
)


@dataclass(frozen=True)
class StackKind:
    kind: str
    cloud: str
    model: type[Spec]
    # Meaning checks: (config, region, project) -> findings; region and project (GCP's) are None when malformed.
    findings: Callable[[Any, str | None, str | None], list[Problem]]
    builder: str  # module under stacks/ whose build(config) declares the stack's resources


STACK_KINDS: tuple[StackKind, ...] = (
    StackKind("registry", "aws", RegistryStackConfig, lambda config, region, project: [], "stacks.aws.registry"),
    StackKind(
        "training",
        "aws",
        TrainingStackConfig,
        lambda config, region, project: (
            training_findings(config.training, region)
            + (registry_stack_findings(config.registry_stack) or registry_region_finding(config.registry_stack, region))
        ),
        "stacks.aws.training",
    ),
    StackKind(
        "serving",
        "aws",
        ServingStackConfig,
        lambda config, region, project: (
            serving_findings(config.serving, region) + registry_stack_findings(config.registry_stack)
        ),
        "stacks.aws.serving",
    ),
    StackKind(
        "registry",
        "gcp",
        GcpRegistryStackConfig,
        lambda config, region, project: mirror_findings(config.registry.mirror),
        "stacks.gcp.registry",
    ),
    StackKind(
        "training",
        "gcp",
        GcpTrainingStackConfig,
        lambda config, region, project: gcp_training_findings(config.training, region),
        "stacks.gcp.training",
    ),
    StackKind(
        "serving",
        "gcp",
        GcpServingStackConfig,
        lambda config, region, project: gcp_serving_findings(config.serving, region, project),
        "stacks.gcp.serving",
    ),
)
KINDS = tuple(dict.fromkeys(k.kind for k in STACK_KINDS))
CLOUDS = ("aws", "gcp")  # `mlinfra:cloud`, default aws


def _gcp_provider_findings(flat: dict[str, Any]) -> list[Problem]:
    """The provider keys' shape (infra.core.providers), then a well-formed gcp:region against the catalog."""
    problems = gcp_provider_findings(flat)
    region = flat.get("gcp:region")
    if isinstance(region, str) and not any(p.path == "gcp:region" for p in problems):
        problem = region_problem(region)
        problems += [Problem("gcp:region", problem)] if problem else []
    return problems


PROVIDER_FINDINGS = {"aws": aws_provider_findings, "gcp": _gcp_provider_findings}
REGION_KEY = {"aws": "aws:region", "gcp": "gcp:region"}
_TABLE = {(k.kind, k.cloud): k for k in STACK_KINDS}


def cloud_of(config: Any) -> str:
    return getattr(config, "cloud", "aws")


def stack_kind(config: Any) -> StackKind:
    """The table's row of a validated config."""
    return _TABLE[(config.kind, cloud_of(config))]


def validate(values: dict[str, Any]) -> StackConfig:
    """Validate the `mlinfra` namespace (keys without the `mlinfra:` prefix) into the model of its kind."""
    kind = values.get("kind")
    if kind is None:
        raise InputError(Problem(f"{NAMESPACE}:kind", f"required; one of {', '.join(KINDS)}"))
    if kind not in KINDS:
        raise InputError(Problem(f"{NAMESPACE}:kind", f"{kind!r} is not a stack kind; allowed: {', '.join(KINDS)}"))
    cloud = values.get("cloud", "aws")
    if cloud not in CLOUDS:
        raise InputError(Problem(f"{NAMESPACE}:cloud", f"{cloud!r} is not a cloud; allowed: {', '.join(CLOUDS)}"))
    row = _TABLE.get((kind, cloud))
    if row is None:
        offered = [k.kind for k in STACK_KINDS if k.cloud == cloud]
        raise InputError(
            Problem(f"{NAMESPACE}:cloud", f"{cloud} has no {kind} stacks yet (it has: {', '.join(offered)}); use aws")
        )
    if cloud == "aws":
        values = {k: v for k, v in values.items() if k != "cloud"}  # aws: the default, may be spelt out
    try:
        return row.model.model_validate(values)  # type: ignore[return-value]
    except ValidationError as error:
        raise InputError(problems_from(error, row.model, NAMESPACE)) from None


def provider_key_findings(flat: dict[str, Any]) -> list[Problem]:
    """Keys of a provider's namespace that the provider does not take (a typo it would silently ignore)."""
    problems = []
    for name in sorted(flat):
        namespace, _, key = str(name).partition(":")
        if namespace in provider_config.providers() and key:
            message = provider_config.unknown_key_message(namespace, key.split(".", 1)[0])
            if message:
                problems.append(Problem(name, message))
    return problems


def load(flat: dict[str, Any]) -> StackConfig:
    """Validate a stack's whole config (every namespace, as the engine hands it over): the provider keys, the
    shape, then the meaning checks of its (kind, cloud), which see the region only when it is well formed."""
    problems = provider_key_findings(flat)
    problems += aws_provider_findings(flat)  # a malformed aws:region is reported whatever the cloud
    try:
        config = validate(namespace_values(flat))
    except InputError as error:
        raise InputError(problems + error.problems) from None
    cloud = cloud_of(config)
    if cloud != "aws":
        problems += PROVIDER_FINDINGS[cloud](flat)
    bad = {p.path for p in problems}
    region = None if REGION_KEY[cloud] in bad else flat.get(REGION_KEY[cloud])
    project = None if "gcp:project" in bad else flat.get("gcp:project")
    problems += stack_kind(config).findings(config, region, project)
    if problems:
        raise InputError(problems)
    return config
