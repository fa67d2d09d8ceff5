"""Direct describes that confirm a Resource Groups Tagging API hit. Right after a destroy the tagging
API still lists resources that are gone (or going): for each ARN kind here, one describe call says
whether the resource is "present", "deleting" or "gone". Kinds without a confirmer are reported as
the tagging API found them; a describe that fails for any reason but "not found" counts as present.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

from botocore.exceptions import ClientError

Presence = Literal["present", "deleting", "gone"]
Check = Callable[[Any, str], Presence]  # (client, ARN) -> presence

_NOT_FOUND = {
    "NoSuchEntity",
    "ResourceNotFoundException",
    "DataRepositoryAssociationNotFound",
    "FileSystemNotFound",
    "NatGatewayNotFound",
}


def _not_found(error: ClientError) -> bool:
    code = error.response.get("Error", {}).get("Code", "")
    return code in _NOT_FOUND or code.endswith(("NotFound", ".Unknown", "NotFoundException"))


def _resource(arn: str) -> str:
    """'natgateway/nat-1' from arn:aws:ec2:r:a:natgateway/nat-1; 'function:f' from a Lambda ARN."""
    return arn.split(":", 5)[5] if arn.count(":") >= 5 else ""


def _last(arn: str) -> str:
    return _resource(arn).rsplit("/", 1)[-1]


def _by_state(
    items: Iterable[dict[str, Any]],
    state_key: str | None,
    gone: tuple[str, ...] = (),
    deleting: tuple[str, ...] = (),
) -> Presence:
    states = {str(item.get(state_key, "")).lower() for item in items} if state_key else {"present" for _ in items}
    if not states or states <= set(gone):
        return "gone"
    return "deleting" if states <= set(gone) | set(deleting) else "present"


def _ids(
    call: str,
    param: str,
    key: str,
    state_key: str | None = None,
    gone: tuple[str, ...] = (),
    deleting: tuple[str, ...] = (),
    ident: Callable[[str], str] = _last,
) -> Check:
    """Describe by id (from the ARN); present unless nothing comes back or every state is a gone one."""
    return lambda client, arn: _by_state(getattr(client, call)(**{param: [ident(arn)]})[key], state_key, gone, deleting)


def _exists(call: Callable[[Any, str], Any]) -> Check:
    """Present when the call answers (it raises "not found" otherwise)."""

    def check(client: Any, arn: str) -> Presence:
        call(client, arn)
        return "present"

    return check


def _log_group(client: Any, arn: str) -> Presence:
    name = _resource(arn).split(":", 1)[-1].removesuffix(":*")
    pages = client.get_paginator("describe_log_groups").paginate(logGroupNamePrefix=name)
    return "present" if any(g["logGroupName"] == name for page in pages for g in page["logGroups"]) else "gone"


def _rule(client: Any, arn: str) -> Presence:
    parts = _resource(arn).split("/")  # rule/<name> or rule/<bus>/<name>
    client.describe_rule(Name=parts[-1], **({"EventBusName": parts[1]} if len(parts) == 3 else {}))
    return "present"


def _schedule(client: Any, arn: str) -> Presence:
    _, group, name = _resource(arn).split("/", 2)  # schedule/<group>/<name>
    client.get_schedule(GroupName=group, Name=name)
    return "present"


# kind (as audit._kind names it) -> (boto3 service, check)
CONFIRMERS: dict[str, tuple[str, Check]] = {
    "ec2:natgateway": (
        "ec2",
        _ids("describe_nat_gateways", "NatGatewayIds", "NatGateways", "State", gone=("deleted", "deleting")),
    ),
    "ec2:elastic-ip": ("ec2", _ids("describe_addresses", "AllocationIds", "Addresses")),
    "ec2:fleet": (
        "ec2",
        _ids(
            "describe_fleets",
            "FleetIds",
            "Fleets",
            "FleetState",
            gone=("deleted", "deleted_running", "deleted_terminating"),
        ),
    ),
    "ec2:vpc": ("ec2", _ids("describe_vpcs", "VpcIds", "Vpcs")),
    "ec2:subnet": ("ec2", _ids("describe_subnets", "SubnetIds", "Subnets")),
    "ec2:security-group": ("ec2", _ids("describe_security_groups", "GroupIds", "SecurityGroups")),
    "ec2:route-table": ("ec2", _ids("describe_route_tables", "RouteTableIds", "RouteTables")),
    "ec2:internet-gateway": ("ec2", _ids("describe_internet_gateways", "InternetGatewayIds", "InternetGateways")),
    "ec2:vpc-endpoint": (
        "ec2",
        _ids(
            "describe_vpc_endpoints",
            "VpcEndpointIds",
            "VpcEndpoints",
            "State",
            gone=("deleted",),
            deleting=("deleting",),
        ),
    ),
    "ec2:launch-template": ("ec2", _ids("describe_launch_templates", "LaunchTemplateIds", "LaunchTemplates")),
    "ec2:placement-group": (
        "ec2",
        _ids(
            "describe_placement_groups",
            "GroupNames",
            "PlacementGroups",
            "State",
            gone=("deleted",),
            deleting=("deleting",),
        ),
    ),
    "fsx:association": (
        "fsx",
        _ids(
            "describe_data_repository_associations",
            "AssociationIds",
            "Associations",
            "Lifecycle",
            deleting=("deleting",),
        ),
    ),
    "lambda:function": ("lambda", _exists(lambda client, arn: client.get_function(FunctionName=arn))),
    "events:rule": ("events", _rule),
    "logs:log-group": ("logs", _log_group),
    "iam:role": ("iam", _exists(lambda client, arn: client.get_role(RoleName=_last(arn)))),
    "scheduler:schedule": ("scheduler", _schedule),
}


def presence(kind: str, arn: str, client_for: Callable[[str], Any]) -> Presence | None:
    """What a direct describe says of `arn`; None when no confirmer knows its kind."""
    entry = CONFIRMERS.get(kind)
    if entry is None:
        return None
    service, check = entry
    try:
        return check(client_for(service), arn)
    except ClientError as error:
        return "gone" if _not_found(error) else "present"
