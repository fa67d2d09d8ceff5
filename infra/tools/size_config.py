"""`size --write`: the serving config of a sized option, as stack YAML and as `pulumi config set --path` commands
(the same keys), so the chosen hardware, precision and replica bounds go into a stack as they were sized."""

from __future__ import annotations

import argparse
import math
import shlex
from typing import Any

import yaml

from infra.catalog.accelerators import ServingOffer, serving_offers
from infra.serving.families import FAMILIES
from infra.serving.sizing import Option, Request


def family_of(offer: ServingOffer) -> str:
    """The pool family whose devices and cloud are the offer's."""
    return next(n for n, f in FAMILIES.items() if f.cloud == offer.cloud and offer.device.name in f.devices)


def _second_size(option: Option) -> str | None:
    """The next dearer size of the same family that also holds a replica (else the next cheaper one): an EKS pool
    lists two or more sizes, so a capacity shortage of one does not stop scaling."""
    family, chosen = family_of(option.offer), option.offer
    others = sorted(
        (
            o
            for o in serving_offers()
            if o.cloud == "aws" and family_of(o) == family and o.devices >= option.tensor_parallel
            and o.instance_type != chosen.instance_type and o.price_per_hour is not None
        ),
        key=lambda o: o.price_per_hour or 0.0,
    )  # fmt: skip
    dearer = [o for o in others if (o.price_per_hour or 0.0) >= (chosen.price_per_hour or 0.0)]
    picked = dearer[:1] or others[-1:]
    return picked[0].instance_type if picked else None


def config(option: Option, request: Request, args: argparse.Namespace) -> dict[str, Any]:
    """The `mlinfra:serving` values of the option: its node pool and the model entry at index args.index."""
    family = family_of(option.offer)
    max_replicas = max(option.replicas * 2, option.replicas + 1)
    per_node = max(1, math.ceil(option.replicas / option.nodes))
    max_nodes = math.ceil(max_replicas / per_node)
    if option.offer.cloud == "aws":
        types = [option.offer.instance_type] + [t for t in [_second_size(option)] if t]
        pool: dict[str, Any] = {"instanceTypes": types, "minSize": option.nodes, "maxSize": max_nodes}
    else:
        pool = {"machineTypes": [option.offer.instance_type], "minNodes": option.nodes, "maxNodes": max_nodes}
    model = {
        "name": args.name,
        "version": args.version,
        "accelerator": family,
        "image": args.image,
        "modelConfig": args.model_config,
        "precision": option.precision.name,
        "acceleratorsPerReplica": option.tensor_parallel,
        "maxModelLen": request.max_model_len,
        "minReplicas": option.replicas,
        "maxReplicas": max_replicas,
        "slo": {
            "ttftP95Ms": round(request.slo.ttft_p95_seconds * 1000),
            "tpotP95Ms": round(request.slo.tpot_p95_seconds * 1000, 1),
        },
    }
    return {"nodePools": {family: pool}, "models": {args.index: model}}


def _paths(prefix: str, value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        found = []
        for key, item in value.items():
            part = f"[{key}]" if isinstance(key, int) else f".{key}"
            found += _paths(prefix + part, item)
        return found
    if isinstance(value, list):
        return [pair for i, item in enumerate(value) for pair in _paths(f"{prefix}[{i}]", item)]
    return [(prefix, value)]


def write_lines(option: Option, request: Request, args: argparse.Namespace) -> list[str]:
    values = config(option, request, args)
    as_yaml = {"nodePools": values["nodePools"], "models": list(values["models"].values())}
    lines = [
        f"# the cheapest option: {option.offer.label} {option.precision.name} TP {option.tensor_parallel}, "
        f"{option.replicas} replicas; in the stack file under mlinfra:serving (models[{args.index}]):",
        *yaml.safe_dump(as_yaml, sort_keys=False).splitlines(),
        "# or the same keys with the Pulumi CLI:",
    ]
    for path, value in _paths("mlinfra:serving", values):
        lines.append(f"pulumi config set --path {shlex.quote(path)} {shlex.quote(str(value))}")
    return lines
