"""Check data/accelerators.json against itself and the instance catalogs of both clouds.

The device facts are curated from datasheets (no API publishes them), so this script does what the
instance refresh does for generated data: it keeps the curated table and the generated ones in step.

    python -m infra.catalog.accelerators_check     # exit 1 listing every problem

Checked: every AWS serving type (roles.json) has device facts; a device's memory equals what
DescribeInstanceTypes reports for every AWS type carrying it and never exceeds the GCP catalog's GPU memory;
every format a device or precision names is in the format table; a compute format has a peak throughput and a
format without one is not a compute format; every device has a source and an as-of date; every serving type
has a sourced price.
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib.resources import files
from typing import Any

from infra.catalog import gcp as gcp_catalog
from infra.catalog.accelerators import format_names, serving_offers
from infra.catalog.aws import instance_type
from infra.catalog.roles import types_for


def load() -> dict[str, Any]:
    return json.loads((files("infra.catalog") / "data" / "accelerators.json").read_text(encoding="utf-8"))


def problems(raw: dict[str, Any] | None = None) -> list[str]:
    """Every problem of the accelerator table `raw` (default: the committed file)."""
    raw = load() if raw is None else raw
    formats = set(format_names())
    found: list[str] = []
    for name, item in raw["precisions"].items():
        found += [
            f"precision {name}: {part} format {item[part]!r} is not in formats"
            for part in ("weights", "activations", "kvCache")
            if item[part] not in formats
        ]
    by_aws_name = {}
    for name, item in raw["devices"].items():
        if not item.get("source") or not item.get("asOf"):
            found.append(f"device {name}: no source or asOf")
        for key in ("computeFormats", "weightFormats", "kvCacheFormats"):
            found += [f"device {name}: {key} names unknown format {f!r}" for f in item[key] if f not in formats]
        peaks = item["denseTflops"]
        found += [
            f"device {name}: compute format {f} has no denseTflops" for f in item["computeFormats"] if not peaks.get(f)
        ]
        found += [
            f"device {name}: denseTflops.{f} is null but {f} is listed as a compute format"
            for f, value in peaks.items()
            if value is None and f in item["computeFormats"]
        ]
        if "aws" in item["catalogNames"]:
            by_aws_name[item["catalogNames"]["aws"]] = (name, item["memoryMiB"])
        if "gcp" in item["catalogNames"]:
            gcp_types = [
                gcp_catalog.machine_type(t)
                for t in gcp_catalog.known_machine_types()
                if gcp_catalog.machine_type(t).accelerator.type == item["catalogNames"]["gcp"]
            ]
            if not gcp_types:
                found.append(f"device {name}: no GCP machine type carries {item['catalogNames']['gcp']}")
            found += [
                f"device {name}: {item['memoryMiB']} MiB exceeds {t.name}'s {t.accelerator.memory_gib} GiB per GPU"
                for t in gcp_types
                if item["memoryMiB"] > t.accelerator.memory_gib * 1024
            ]
    for type_name in types_for("serving"):
        it = instance_type(type_name)
        entry = by_aws_name.get(it.accelerator_model or "")
        if entry is None:
            found.append(f"serving type {type_name}: no device facts for its {it.accelerator_model} accelerator")
            continue
        device_name, memory = entry
        reported = it.accelerators[0].memory_mib
        if reported != memory:
            found.append(
                f"device {device_name}: memoryMiB {memory}, but DescribeInstanceTypes reports {reported} "
                f"for {type_name}"
            )
    found += [
        f"serving type {o.label}: no sourced on-demand price" for o in serving_offers() if o.price_per_hour is None
    ]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    found = problems()
    for problem in found:
        print(f"error: {problem}", file=sys.stderr)
    if not found:
        print(f"accelerators.json: {len(serving_offers())} serving types of both clouds checked")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
