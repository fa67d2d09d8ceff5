"""How big a conversion Job is, and whether a node of the pool it targets can hold it (pure).

The `convert` step dominates the pod (init containers run one at a time, so the pod asks for the largest
of them): its requests are sized from the checkpoint by the recipe's factors (recipes.py), and the work
volume holds checkpoint, intermediates and artefact. A Job no instance type of its pool can hold would
stay Pending for ever, so promote refuses it at plan time (also with --dry-run), naming the size that
would fit. What a node leaves for pods is the serving domain's estimate (infra/serving/aws/allocatable.py),
the same the serving config's schedulability check uses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from infra.catalog.aws import instance_type, known_instance_types
from infra.core.errors import Problem
from infra.ops.promotion.recipes import Recipe
from infra.serving.aws.allocatable import (  # noqa: F401  (re-exported: promote's sizing reads them here)
    GIB,
    Resources,
    allocatable,
    disk_needed,
    holds,
    kube_reserved_cpu,
    larger_type,
    usable_disk,
)
from infra.serving.families import FAMILIES
from infra.serving.fit import host_memory_gib
from infra.serving.spec import ModelSpec


def conversion_resources(recipe: Recipe, checkpoint_bytes: int, devices: int = 1) -> Resources:
    """Requests of the `convert` and `check` steps (whole cores and GiB, rounded up) for a checkpoint of that
    size, on as many devices as the server's tensor-parallel shape takes."""
    size = checkpoint_bytes / GIB
    return Resources(
        cpu=recipe.cpu,
        memory_gib=math.ceil(recipe.memory_factor * size + recipe.memory_base_gib),
        disk_gib=math.ceil(recipe.disk_factor * size + recipe.disk_base_gib),
        devices=devices,
    )


def server_memory_gib(accelerator: str, weights_bytes: int) -> int:
    return host_memory_gib("neuron" if FAMILIES[accelerator].neuron else "gpu", weights_bytes)


def server_problems(field: str, model: ModelSpec, instance_types: Sequence[str], weights_bytes: int) -> list[Problem]:
    """Whether the model entry's replica can load these weights (its memoryGib) and fits a node of its pool."""
    problems = []
    need = server_memory_gib(model.accelerator, weights_bytes)
    if model.memory_gib < need:
        problems.append(
            Problem(
                f"{field}.memoryGib",
                f"a replica of {model.name} loading {weights_bytes / GIB:.1f} GiB of weights on {model.accelerator} "
                f"needs about {need} GiB of memory; memoryGib is {model.memory_gib}: set memoryGib to {need}",
            )
        )
    replica = Resources(
        cpu=model.cpu, memory_gib=max(need, model.memory_gib), disk_gib=0, devices=model.accelerators_per_replica
    )
    if not any(holds(t, replica) for t in instance_types):
        bigger = larger_type(instance_types, replica)
        problems.append(
            Problem(
                f"mlinfra:serving.nodePools.{model.accelerator}.instanceTypes",
                f"a replica of {model.name} ({_devices(replica)}{_n(replica.cpu)} CPU, {_n(replica.memory_gib)} GiB "
                f"memory) fits no node of {', '.join(instance_types)}: "
                + (f"add {bigger}" if bigger else "no instance type of its accelerator in the catalog holds it"),
            )
        )
    return problems


def fit_problem(
    variant: str,
    pool: str,
    instance_types: Sequence[str],
    disk_gib: int,
    need: Resources,
    checkpoint_bytes: int,
    task: str | None = None,
) -> Problem | None:
    """None when some instance type of the pool holds the step; else the problem, saying what would. `task`: what
    the step does, after "to" (default: convert the checkpoint)."""
    fitting = [t for t in instance_types if holds(t, need)]
    disk_ok = usable_disk(disk_gib) >= need.disk_gib
    if fitting and disk_ok:
        return None
    would = []
    if not fitting:
        bigger = larger_type(instance_types, need)
        would.append(
            f"{bigger} would (add it to instanceTypes)"
            if bigger
            else "no instance type of its accelerator in the catalog would"
        )
    if not disk_ok:
        would.append(f"diskGib {disk_needed(need)} would hold the work volume")
    return Problem(
        f"mlinfra:serving.nodePools.{pool}",
        (
            f"variant {variant} needs {_devices(need)}{_n(need.cpu)} CPU, {_n(need.memory_gib)} GiB memory and "
            f"{_n(need.disk_gib)} GiB "
            f"disk to {task or f'convert a {checkpoint_bytes / GIB:.1f} GiB checkpoint'}; no instance type of node "
            f"pool {pool} "
            f"({', '.join(instance_types)}; diskGib {disk_gib}, {usable_disk(disk_gib):.0f} GiB usable) holds it: "
            + "; ".join(would)
        ),
    )


def device_memory_problem(
    variant: str, pool: str, instance_types: Sequence[str], need_gib: float, task: str
) -> Problem | None:
    """None when a device of some instance type of the pool holds `need_gib`; else the problem, naming the
    smallest catalog type whose devices would."""
    devices = [instance_type(t).accelerators[0] for t in instance_types if instance_type(t).accelerators]
    if not devices or max(d.memory_mib for d in devices) / 1024 >= need_gib:
        return None
    largest = max(devices, key=lambda d: d.memory_mib)
    kind = largest.kind
    able = [
        it
        for it in (instance_type(n) for n in known_instance_types())
        if it.accelerators and it.accelerators[0].kind == kind and it.accelerators[0].memory_mib / 1024 >= need_gib
    ]
    bigger = min(able, key=lambda it: (it.accelerators[0].memory_mib, it.memory_mib, it.name), default=None)
    return Problem(
        f"mlinfra:serving.nodePools.{pool}",
        f"variant {variant} needs {need_gib:.1f} GiB on one device to {task}; the largest device of node pool "
        f"{pool} ({', '.join(instance_types)}): {largest.model}, {largest.memory_mib / 1024:.1f} GiB; "
        + (
            f"a pool of {bigger.name} ({bigger.accelerators[0].model}, "
            f"{bigger.accelerators[0].memory_mib / 1024:.1f} GiB per device) would hold it"
            if bigger
            else "no device in the catalog holds it"
        ),
    )


def _devices(need: Resources) -> str:
    return f"{need.devices} accelerator{'s' if need.devices != 1 else ''}, " if need.devices else ""


def _n(value: float) -> str:
    return f"{value:g}"
