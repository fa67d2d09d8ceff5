"""Generate infra/catalog/data/aws_instances.json from the EC2 snapshots that moto ships.

Source data: `moto/ec2/resources/instance_types.json.gz` (DescribeInstanceTypes) and
`moto/ec2/resources/instance_type_offerings/availability-zone/<region>.json.gz`
(DescribeInstanceTypeOfferings). Only ML families are kept, and the general-purpose types of the serving cluster's
system pool. It also writes data/aws_zones.json (offerings by zone ID and the offline preview's zone list;
refresh_zones.py). Known errors in the snapshot are
fixed by explicit corrections below, each recorded with its reason in the output.

    python infra/catalog/refresh.py           # rewrite the file
    python infra/catalog/refresh.py --check   # exit 1 if the committed file is stale
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import importlib.metadata
import json
import sys
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from infra.catalog import refresh_zones

OUTPUT = Path(__file__).resolve().parent / "data" / "aws_instances.json"

FAMILIES = (
    "g4dn",
    "g5",
    "g6",
    "g6e",
    "inf2",
    "p4d",
    "p4de",
    "p5",
    "p5e",
    "p5en",
    "p6-b200",
    "p6-b300",
    "trn1",
    "trn1n",
    "trn2",
)  # trn2u is left out: its snapshot entry has no NeuronInfo at all.

# Every type in docs/reference.md's training and serving tables; a missing one is an error, never a gap.
REQUIRED = (
    "p4d.24xlarge",
    "p4de.24xlarge",
    "p5.48xlarge",
    "p5e.48xlarge",
    "p5en.48xlarge",
    "trn1.32xlarge",
    "trn1n.32xlarge",
    "trn2.48xlarge",
    "inf2.xlarge",
    "inf2.8xlarge",
    "inf2.24xlarge",
    "inf2.48xlarge",
    "g5.xlarge",
    "g5.2xlarge",
    "g5.12xlarge",
    "g5.48xlarge",
    "g6.xlarge",
    "g6e.xlarge",
)

# moto's package metadata carries no release date, and installed file mtimes are install times.
# These are the build timestamps of the wheels on PyPI (zip entry dates of moto-<v>-py3-none-any.whl).
MOTO_RELEASE_DATES = {"5.2.5": "2026-10-27"}


@dataclass(frozen=True)
class AcceleratorCorrection:
    instance_types: tuple[str, ...]
    model: str
    key: str
    snapshot_value: Any
    value: Any
    reason: str


CORRECTIONS = (
    AcceleratorCorrection(
        instance_types=("trn2.3xlarge", "trn2.48xlarge"),
        model="Trainium2",
        key="memoryMiB",
        snapshot_value=524288,
        value=98304,
        reason="The snapshot gives 512 GiB of memory per Trainium2 chip; AWS lists 96 GiB HBM per "
        'chip (1.5 TiB across trn2.48xlarge\'s 16 chips). Source: docs/reference.md training table ("96 GB each"), '
        "AWS EC2 Trn2 instance page.",
    ),
)


def _load_gz(path: Any) -> Any:
    with path.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as f:
        return json.load(f)


def _accelerators(raw: dict[str, Any]) -> list[dict[str, Any]]:
    gpus = [
        {
            "kind": "gpu",
            "manufacturer": g["Manufacturer"],
            "model": g["Name"],
            "count": g["Count"],
            "memoryMiB": g["MemoryInfo"]["SizeInMiB"],
            "coresPerDevice": None,
        }
        for g in raw.get("GpuInfo", {}).get("Gpus", [])
    ]
    # NeuronInfo is the newer field (with core counts); older Inferentia entries only have
    # InferenceAcceleratorInfo. NeuronInfo has no manufacturer: Neuron devices are AWS silicon.
    neuron = [
        {
            "kind": "neuron",
            "manufacturer": "AWS",
            "model": d["Name"],
            "count": d["Count"],
            "memoryMiB": d["MemoryInfo"]["SizeInMiB"],
            "coresPerDevice": d["CoreInfo"]["Count"],
        }
        for d in raw.get("NeuronInfo", {}).get("NeuronDevices", [])
    ] or [
        {
            "kind": "neuron",
            "manufacturer": a["Manufacturer"],
            "model": a["Name"],
            "count": a["Count"],
            "memoryMiB": a["MemoryInfo"]["SizeInMiB"],
            "coresPerDevice": None,
        }
        for a in raw.get("InferenceAcceleratorInfo", {}).get("Accelerators", [])
    ]
    accelerators = sorted(gpus + neuron, key=lambda a: (a["kind"], a["model"]))
    if len({a["kind"] for a in accelerators}) > 1:
        raise SystemExit(f"{raw['InstanceType']}: mixed accelerator kinds, the catalog model assumes one")
    return accelerators


def _record(raw: dict[str, Any], offerings: dict[str, list[str]]) -> dict[str, Any]:
    net = raw["NetworkInfo"]
    cards = [
        {
            "index": c["NetworkCardIndex"],
            "baselineGbps": c["BaselineBandwidthInGbps"],
            "peakGbps": c["PeakBandwidthInGbps"],
            "maxInterfaces": c["MaximumNetworkInterfaces"],
            "interfaceTypes": sorted(c["InterfaceTypes"]),
        }
        for c in net["NetworkCards"]
    ]
    return {
        "name": raw["InstanceType"],
        "vcpus": raw["VCpuInfo"]["DefaultVCpus"],
        "memoryMiB": raw["MemoryInfo"]["SizeInMiB"],
        "accelerators": _accelerators(raw),
        "networkCards": sorted(cards, key=lambda c: c["index"]),
        "maximumNetworkCards": net["MaximumNetworkCards"],
        "efaSupported": net["EfaSupported"],
        "maxEfaInterfaces": net.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0),
        "enaSupport": net["EnaSupport"],
        "placementStrategies": sorted(raw.get("PlacementGroupInfo", {}).get("SupportedStrategies", [])),
        "usageClasses": sorted(raw["SupportedUsageClasses"]),
        "offerings": {region: sorted(azs) for region, azs in sorted(offerings.items())},
    }


def _apply(correction: AcceleratorCorrection, types: dict[str, dict[str, Any]]) -> dict[str, Any]:
    for name in correction.instance_types:
        matches = [a for a in types[name]["accelerators"] if a["model"] == correction.model]
        if len(matches) != 1:
            raise SystemExit(f"correction for {name}: expected one {correction.model} accelerator entry")
        found = matches[0][correction.key]
        if found == correction.value:
            raise SystemExit(f"correction for {name} is obsolete: the snapshot now has {found}; remove it")
        if found != correction.snapshot_value:
            raise SystemExit(
                f"correction for {name}: snapshot has {found}, expected {correction.snapshot_value}; "
                "re-check the fact before changing the correction"
            )
        matches[0][correction.key] = correction.value
    return {
        "instanceTypes": list(correction.instance_types),
        "field": f"accelerators[model={correction.model}].{correction.key}",
        "snapshotValue": correction.snapshot_value,
        "value": correction.value,
        "reason": correction.reason,
    }


def _as_of(version: str, snapshot: Any) -> tuple[str, str]:
    if version in MOTO_RELEASE_DATES:
        return MOTO_RELEASE_DATES[version], f"release date of moto {version} (wheel build date on PyPI)"
    print(
        f"warning: no release date on record for moto {version}; add it to MOTO_RELEASE_DATES. "
        "Using the snapshot file's mtime, which is usually the install time.",
        file=sys.stderr,
    )
    mtime = datetime.datetime.fromtimestamp(Path(str(snapshot)).stat().st_mtime, datetime.UTC)
    return mtime.date().isoformat(), "file mtime of instance_types.json.gz (install time, not data time)"


def generate() -> tuple[str, str]:
    """(aws_instances.json, aws_zones.json) as they should be."""
    version = importlib.metadata.version("moto")
    resources = files("moto.ec2") / "resources"
    snapshot = resources / "instance_types.json.gz"
    raw_types = _load_gz(snapshot)
    wanted = {
        name: raw
        for name, raw in raw_types.items()
        if name.split(".")[0] in FAMILIES or name in refresh_zones.GENERAL_PURPOSE
    }
    missing = [name for name in (*REQUIRED, *refresh_zones.GENERAL_PURPOSE) if name not in wanted]
    if missing:
        raise SystemExit(
            f"not in the moto {version} snapshot: {', '.join(missing)}; "
            "add them here as explicit, cited fact data before regenerating"
        )

    offerings: dict[str, dict[str, list[str]]] = {name: {} for name in wanted}
    by_az = resources / "instance_type_offerings" / "availability-zone"
    for path in sorted(by_az.iterdir(), key=lambda p: p.name):
        region = path.name.removesuffix(".json.gz")
        for offer in _load_gz(path):
            if offer["InstanceType"] in offerings:
                offerings[offer["InstanceType"]].setdefault(region, []).append(offer["Location"])

    types = {name: _record(raw, offerings[name]) for name, raw in sorted(wanted.items())}
    corrections = [_apply(c, types) for c in CORRECTIONS]
    as_of, basis = _as_of(version, snapshot)
    document = {
        "source": f"AWS EC2 DescribeInstanceTypes / DescribeInstanceTypeOfferings, as shipped in moto {version}",
        "asOf": as_of,
        "asOfBasis": basis,
        "generatedBy": "python -m infra.catalog.refresh",
        "families": sorted(FAMILIES),
        "generalPurposeTypes": list(refresh_zones.GENERAL_PURPOSE),
        "corrections": corrections,
        "instanceTypes": types,
    }
    zones = refresh_zones.generate(version, as_of, basis, sorted(types))
    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n", zones


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is stale")
    args = parser.parse_args(argv)
    outputs = dict(zip((OUTPUT, refresh_zones.OUTPUT), generate(), strict=True))
    if args.check:
        stale = [p for p, text in outputs.items() if (p.read_text(encoding="utf-8") if p.exists() else None) != text]
        for path in stale:
            print(f"{path} is stale; run: python infra/catalog/refresh.py", file=sys.stderr)
        return 1 if stale else 0
    for path, text in outputs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
