"""Documented offline answers to the provider functions (invokes) that programs call.

The offline preview has no credentials, so account, AMI and parameter lookups get these fixed,
recognisable values. Every answer used is reported in the preview as an `info` diagnostic;
`pulumi up` asks the cloud instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from infra.core.providers import aws_partition
from infra.providers import tokens
from infra.tools.offline.invokes_gcp import GCP_ANSWERS

OFFLINE_ACCOUNT_ID = "123456789012"  # AWS's documentation account id
OFFLINE_AMI_PREFIX = "ami-0offline"


def _region(config: dict[str, Any], args: dict[str, Any]) -> str:
    return args.get("region") or config.get("aws:region") or "us-east-1"


def _caller_identity(config: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    arn = f"arn:aws:iam::{OFFLINE_ACCOUNT_ID}:user/offline-preview"
    return {"accountId": OFFLINE_ACCOUNT_ID, "arn": arn, "userId": "AIDAOFFLINEPREVIEW", "id": OFFLINE_ACCOUNT_ID}


def _region_info(config: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    region = _region(config, args)
    return {
        "region": region,
        "name": region,
        "id": region,
        "endpoint": f"ec2.{region}.amazonaws.com",
        "description": region,
    }


def _partition(config: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """The configured region's partition, as the provider answers it (aws-us-gov in us-gov-west-1)."""
    found = aws_partition(_region(config, args))
    suffix = found["dnsSuffix"]
    return {
        "partition": found["partition"],
        "dnsSuffix": suffix,
        "id": found["partition"],
        "reverseDnsPrefix": ".".join(reversed(suffix.split("."))),
    }


def _availability_zones(config: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """The region's zones as one fixed account names them (the catalog's offline zone list, by name), less
    those the call excludes: names and zone IDs pair up as DescribeAvailabilityZones pairs them."""
    from infra.catalog.aws.zones import offline_zones

    region = _region(config, args)
    excluded_names, excluded_ids = set(args.get("excludeNames") or ()), set(args.get("excludeZoneIds") or ())
    zones = [(n, i) for n, i in offline_zones(region).items() if n not in excluded_names and i not in excluded_ids]
    return {
        "names": [n for n, _ in zones],
        "zoneIds": [i for _, i in zones],
        "id": region,
        "groupNames": [region],
    }


def _fake_ami(seed: str) -> str:
    return OFFLINE_AMI_PREFIX + hashlib.sha256(seed.encode()).hexdigest()[:9]


def _ssm_parameter(config: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    name = args.get("name", "")
    value = _fake_ami(name) if "ami" in name.lower() else f"offline-value-of:{name}"
    return {
        "name": name,
        "value": value,
        "insecureValue": value,
        "type": "String",
        "arn": "",
        "id": name,
        "version": 1,
        "withDecryption": True,
    }


def _ami(config: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    image_id = _fake_ami(repr(sorted(args.items())))
    return {
        "id": image_id,
        "imageId": image_id,
        "architecture": "x86_64",
        "name": "offline-ami",
        "rootDeviceName": "/dev/sda1",
    }


def _instances(config: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """The instances named by an `instance-id` filter, with private IPs from 10.255.0.0/16."""
    ids = [v for f in args.get("filters") or [] if f.get("name") == "instance-id" for v in f.get("values") or []]
    ips = [f"10.255.{n // 250}.{n % 250 + 4}" for n in range(len(ids))]
    return {"ids": ids, "privateIps": ips, "publicIps": [], "ipv6Addresses": [], "id": "offline-instances"}


# token -> (answer, what the answer stands for)
ANSWERS: dict[str, tuple[Callable[[dict, dict], dict], str]] = {
    tokens.AWS_GET_CALLER_IDENTITY: (_caller_identity, f"account {OFFLINE_ACCOUNT_ID}"),
    tokens.AWS_GET_REGION: (_region_info, "the configured aws:region"),
    tokens.AWS_GET_PARTITION: (_partition, "the region's partition"),
    tokens.AWS_GET_AVAILABILITY_ZONES: (
        _availability_zones,
        "one fixed account's zones of the region (moto's names and zone IDs)",
    ),
    tokens.AWS_SSM_GET_PARAMETER: (_ssm_parameter, f"a placeholder ({OFFLINE_AMI_PREFIX}... for AMI parameters)"),
    tokens.AWS_EC2_GET_AMI: (_ami, f"a placeholder image id ({OFFLINE_AMI_PREFIX}...) with root device /dev/sda1"),
    tokens.AWS_EC2_GET_INSTANCES: (_instances, "the filtered instance ids with placeholder IPs in 10.255.0.0/16"),
    **GCP_ANSWERS,
}


def answer(token: str, config: dict[str, Any], args: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """(result, description) for a known invoke, or None."""
    entry = ANSWERS.get(token)
    if entry is None:
        return None
    fn, description = entry
    return fn(config, args), description
