"""Which stacks the lifecycle commands take (training stacks with a file in the project's stacks/), and what
they need to know of one whichever its cloud."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from infra.catalog.aws import on_demand_price as aws_price
from infra.catalog.gcp import on_demand_price as gcp_price
from infra.core.errors import InputError, Problem
from infra.core.project import Project, stack_config, stacks_of_kind
from infra.training.spec import LifecycleSpec


def training_stacks(project: Project) -> list[str]:
    return stacks_of_kind(project, "training")


def training_stack_config(project: Project, stack: str) -> dict[str, Any]:
    """The stack file's config; InputError naming `--stack` unless it is a training stack of the project."""
    config = stack_config(project, stack)  # an unknown stack: InputError on --stack, with the known ones
    kind = config.get("mlinfra:kind")
    if kind != "training":
        allowed = ", ".join(training_stacks(project)) or "none in stacks/"
        raise InputError(
            Problem(
                "--stack", f"'{stack}' is a {kind or 'kind-less'} stack; this command takes a training stack: {allowed}"
            )
        )
    return config


@dataclass(frozen=True)
class RunSubject:
    """What `run` and `teardown` need of a training stack that differs between the clouds."""

    cloud: Literal["aws", "gcp"]
    run_id: str
    machine_type: str
    node_count: int
    hourly_price: float | None  # per node, on demand; None when the catalog has no sourced price
    lifecycle: LifecycleSpec
    data_bucket: str | None = None  # GCP: where the markers are (the config's dataBucket); AWS: the registry's

    def cap(self, expires_at: str) -> str:
        """What stops the spend at expires-at when nobody runs the teardown, and what does not."""
        if self.cloud == "aws":
            return f"its run guard stops the compute at expires-at {expires_at} at the latest"
        return (
            f"Compute Engine deletes its running nodes at expires-at {expires_at} at the latest, but its file "
            "system and networks bill until the teardown (there is no run guard on GCP)"
        )

    def kept_until(self, expires_at: str) -> str:
        if self.cloud == "aws":
            return f"until expires-at {expires_at}"
        return (
            f"(its running nodes until expires-at {expires_at}; its file system and networks until the teardown, "
            "however long that is)"
        )

    @property
    def on_expiry(self) -> str:
        return (
            "the run guard terminates the nodes and exports the checkpoints"
            if self.cloud == "aws"
            else "Compute Engine deletes the running nodes; the teardown exports the checkpoints"
        )


def run_subject(config: Any) -> RunSubject:
    """From a loaded training config (`TrainingStackConfig` or `GcpTrainingStackConfig`)."""
    spec = config.training
    if getattr(config, "cloud", "aws") == "gcp":
        return RunSubject(
            "gcp",
            spec.run_id,
            spec.machine_type,
            spec.node_count,
            gcp_price(spec.machine_type),
            spec.lifecycle,
            data_bucket=spec.data_bucket,
        )
    return RunSubject(
        "aws", spec.run_id, spec.instance_type, spec.node_count, aws_price(spec.instance_type), spec.lifecycle
    )


def marker_bucket(outputs: dict[str, Any]) -> str | None:
    """Where a deployed training stack's nodes write their markers, from its outputs."""
    return outputs.get("registryBucket") or outputs.get("dataBucket") or None


_AZ = re.compile(r"([a-z]{2}(?:-gov|-iso[a-z]?)?-[a-z]+-\d+)[a-z]")


def deployed_region(outputs: dict[str, Any]) -> str | None:
    """The AWS region a training stack was deployed to, from its outputs: `region`, else the region of its
    `availabilityZone` (stacks deployed before the `region` output); None when the outputs say neither."""
    region = outputs.get("region")
    if isinstance(region, str) and region:
        return region
    zone = outputs.get("availabilityZone")
    found = _AZ.fullmatch(zone) if isinstance(zone, str) else None
    return found.group(1) if found else None
