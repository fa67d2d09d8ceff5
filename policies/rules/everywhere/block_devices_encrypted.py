"""Every EBS volume is encrypted: stand-alone volumes, launch template block devices, instance disks."""

from __future__ import annotations

from infra.providers import tokens
from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.aws import INSTANCE, LAUNCH_TEMPLATE, as_list

NAME = "block-devices-encrypted"
VOLUME = tokens.AWS_EBS_VOLUME


def check(resource: Resource) -> list[str]:
    if resource.type == VOLUME:
        return (
            []
            if _encrypted(resource.get("encrypted"))
            else ["encrypted is not true; set encrypted: true (kmsKeyId for a customer managed key)"]
        )
    problems = []
    if resource.type == LAUNCH_TEMPLATE:
        for i, mapping in enumerate(as_list(resource.get("blockDeviceMappings"))):
            if not isinstance(mapping, dict) or mapping.get("noDevice") or not isinstance(mapping.get("ebs"), dict):
                continue
            if not _encrypted(mapping["ebs"].get("encrypted")):
                device = mapping.get("deviceName") or "?"
                problems.append(
                    f"blockDeviceMappings[{i}] ({device}) ebs.encrypted is not true; set ebs.encrypted: true"
                )
    if resource.type == INSTANCE:
        root = resource.get("rootBlockDevice")
        if isinstance(root, dict) and not _encrypted(root.get("encrypted")):
            problems.append("rootBlockDevice.encrypted is not true; set it to true")
        for i, device in enumerate(as_list(resource.get("ebsBlockDevices"))):
            if isinstance(device, dict) and not _encrypted(device.get("encrypted")):
                problems.append(
                    f"ebsBlockDevices[{i}] ({device.get('deviceName') or '?'}) encrypted is not true; set it to true"
                )
    return problems


def _encrypted(value: object) -> bool:
    return value is True or value == "true" or is_unknown(value)


RULE = ResourceRule(
    NAME,
    "EBS volumes and launch template/instance block devices are encrypted.",
    "mandatory",
    (VOLUME, LAUNCH_TEMPLATE, INSTANCE),
    check,
)
