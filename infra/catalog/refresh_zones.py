"""Generate infra/catalog/data/aws_zones.json from the EC2 snapshots that moto ships (run by refresh.py).

Zone names (us-east-1a) map to physical zones differently in every account; zone IDs (use1-az1) do not. So
the zone facts here are by ID:

- `zoneIdOfferings`: region -> instance type -> zone IDs offering it, from moto's
  `instance_type_offerings/availability-zone-id/<region>.json.gz` (DescribeInstanceTypeOfferings with
  `--location-type availability-zone-id`), for the catalog's types and the general-purpose types
  that the serving cluster's system nodes use.
- `offlineZones`: region -> [zone name, zone ID] as moto answers DescribeAvailabilityZones: one fixed
  account's mapping, which the offline preview answers `aws.get_availability_zones` with. A real account
  maps names to IDs its own way; `pulumi up` asks the cloud.
"""

from __future__ import annotations

import gzip
import json
from importlib.resources import files
from pathlib import Path
from typing import Any

OUTPUT = Path(__file__).resolve().parent / "data" / "aws_zones.json"

# Not accelerator types, but in aws_instances.json (no accelerators) so their shape and price are known: the serving
# cluster's system node groups use them (infra/serving/aws/node_pools.py SYSTEM_INSTANCE_TYPES; a test keeps the two
# in step).
GENERAL_PURPOSE = ("m6i.large", "m6i.xlarge")


def _load_gz(path: Any) -> Any:
    with path.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as f:
        return json.load(f)


def zone_id_offerings(types: set[str]) -> dict[str, dict[str, list[str]]]:
    """region -> type -> sorted zone IDs, for the given types (regions where none is offered are left out)."""
    by_id = files("moto.ec2") / "resources" / "instance_type_offerings" / "availability-zone-id"
    found: dict[str, dict[str, list[str]]] = {}
    for path in sorted(by_id.iterdir(), key=lambda p: p.name):
        region = path.name.removesuffix(".json.gz")
        offers: dict[str, set[str]] = {}
        for offer in _load_gz(path):
            if offer["InstanceType"] in types:
                offers.setdefault(offer["InstanceType"], set()).add(offer["Location"])
        if offers:
            found[region] = {name: sorted(ids) for name, ids in sorted(offers.items())}
    return found


def offline_zones(regions: list[str]) -> dict[str, list[list[str]]]:
    """region -> [[name, zone ID], ...] as moto's DescribeAvailabilityZones answers, sorted by name."""
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend

    zones = RegionsAndZonesBackend.zones
    return {
        region: sorted([z.name, z.zone_id] for z in zones[region] if z.zone_type == "availability-zone")
        for region in regions
        if region in zones
    }


def generate(version: str, as_of: str, basis: str, catalog_types: list[str]) -> str:
    offerings = zone_id_offerings(set(catalog_types) | set(GENERAL_PURPOSE))
    missing = [t for t in GENERAL_PURPOSE if not any(t in by_type for by_type in offerings.values())]
    if missing:
        raise SystemExit(f"not offered in any region of the moto {version} snapshot: {', '.join(missing)}")
    document = {
        "source": f"AWS EC2 DescribeInstanceTypeOfferings by availability-zone-id, as shipped in moto {version}; "
        f"offlineZones: moto {version}'s DescribeAvailabilityZones answer (one fixed account's name -> ID mapping, "
        "for the offline preview only)",
        "asOf": as_of,
        "asOfBasis": basis,
        "generatedBy": "python -m infra.catalog.refresh",
        "generalPurposeTypes": list(GENERAL_PURPOSE),
        "zoneIdOfferings": offerings,
        "offlineZones": offline_zones(sorted(offerings)),
    }
    return json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
