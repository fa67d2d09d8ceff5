"""`audit --run-id R`: what a run left behind. Everything still carrying the run's tag through the
Resource Groups Tagging API, plus what that API misses or lags on: FSx backups, the guard's log group
(created untagged by Lambda), network interfaces in the run's VPC (FSx and Lambda create them
untagged), and direct describes of instances, file systems and volumes. The tagging API keeps listing
deleted resources for a while, so its hits are confirmed by a direct describe where one is known
(audit_confirm). A file system (or association) being deleted is still reported, as being deleted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import boto3
from botocore.exceptions import ClientError, NoCredentialsError, NoRegionError

from infra.core.errors import InputError, Problem
from infra.core.providers import aws_region_problem
from infra.ops.lifecycle.aws.audit_confirm import presence
from infra.ops.lifecycle.ports import Leftover
from infra.training.aws import guard
from infra.training.spec import RUN_ID_PATTERN
from run_guard.actions import DELETING, NOT_GONE_STATES, RUN_TAG, run_instances, tag_dict

BEING_DELETED = "being deleted"


def _kind(arn: str) -> str:
    """'ec2:network-interface' from arn:aws:ec2:r:a:network-interface/eni-1; 'logs:log-group' likewise."""
    parts = arn.split(":", 5)
    service, resource = parts[2], parts[5] if len(parts) > 5 else ""
    if service == "s3" and "/" not in resource:
        return "s3:bucket"
    kind = re.split(r"[/:]", resource, maxsplit=1)[0] if re.search(r"[/:]", resource) else ""
    return f"{service}:{kind}" if kind else service


def _key(kind: str, identifier: str) -> tuple[str, str]:
    """Dedupe key: the resource's own id, whether we hold its ARN or its id."""
    ident = identifier[:-2] if identifier.endswith(":*") else identifier
    if kind == "logs:log-group":
        return kind, ident.split(":log-group:", 1)[-1]
    return kind, ident.rsplit("/", 1)[-1]


# The tagging API lags (it lists terminated instances and deleted resources for a while): for these
# kinds only what a direct describe still shows counts.
CONFIRMED_BY_DESCRIBE = {"ec2:instance", "ec2:network-interface", "ec2:volume", "fsx:file-system"}
IGNORED = {"fsx:task"}  # data repository tasks cost nothing and cannot be deleted


def _tagged(session: Any, run_id: str) -> Iterator[tuple[str, str, str, str]]:
    """(kind, ARN, source, state) of the tagging API's hits that a direct describe does not show gone."""
    tagging, clients = session.client("resourcegroupstaggingapi"), {}

    def client_for(service: str) -> Any:
        if service not in clients:
            clients[service] = session.client(service)
        return clients[service]

    for page in tagging.get_paginator("get_resources").paginate(TagFilters=[{"Key": RUN_TAG, "Values": [run_id]}]):
        for mapping in page["ResourceTagMappingList"]:
            kind, arn = _kind(mapping["ResourceARN"]), mapping["ResourceARN"]
            decided_later = kind in IGNORED or kind in CONFIRMED_BY_DESCRIBE  # by audit's own describes
            state = "present" if decided_later else presence(kind, arn, client_for) or "present"
            if state != "gone":
                yield kind, arn, "tagging-api", state


def _terminated(ec2: Any, instance_ids: set[str]) -> set[str]:
    ids, gone = sorted(instance_ids), set()
    for start in range(0, len(ids), 100):  # EC2 takes up to 200 values per filter
        filters = [
            {"Name": "instance-id", "Values": ids[start : start + 100]},
            {"Name": "instance-state-name", "Values": ["terminated"]},
        ]
        gone |= {
            i["InstanceId"]
            for page in ec2.get_paginator("describe_instances").paginate(Filters=filters)
            for r in page["Reservations"]
            for i in r["Instances"]
        }
    return gone


def _described(session: Any, run_id: str) -> Iterator[tuple[str, str, str, str]]:
    """(kind, id or ARN, source, state) of what direct describes show, including what the tagging API misses."""
    ec2, fsx, logs = session.client("ec2"), session.client("fsx"), session.client("logs")
    run_filter = [{"Name": f"tag:{RUN_TAG}", "Values": [run_id]}]
    for instance_id in run_instances(ec2, run_id, NOT_GONE_STATES):
        yield "ec2:instance", instance_id, "instances", "present"
    for page in fsx.get_paginator("describe_file_systems").paginate():
        for fs in page["FileSystems"]:
            if tag_dict(fs.get("Tags")).get(RUN_TAG) == run_id:
                yield (
                    "fsx:file-system",
                    fs.get("ResourceARN") or fs["FileSystemId"],
                    "file-systems",
                    "deleting" if fs.get("Lifecycle") == DELETING else "present",
                )
    for page in fsx.get_paginator("describe_backups").paginate():
        for backup in page["Backups"]:
            fs_tags = tag_dict((backup.get("FileSystem") or {}).get("Tags"))
            if run_id in (tag_dict(backup.get("Tags")).get(RUN_TAG), fs_tags.get(RUN_TAG)):
                yield "fsx:backup", backup.get("ResourceARN") or backup["BackupId"], "fsx-backups", "present"
    guard_log_group = guard.log_group_name(run_id)
    for page in logs.get_paginator("describe_log_groups").paginate(logGroupNamePrefix=guard_log_group):
        for group in page["logGroups"]:
            if group["logGroupName"] == guard_log_group:  # the prefix also matches longer run ids
                yield "logs:log-group", group.get("logGroupArn") or group["arn"], "log-groups", "present"
    vpcs = [
        v["VpcId"] for page in ec2.get_paginator("describe_vpcs").paginate(Filters=run_filter) for v in page["Vpcs"]
    ]
    enis = {
        eni["NetworkInterfaceId"]: (eni.get("Attachment") or {}).get("InstanceId")
        for filters in [run_filter] + ([[{"Name": "vpc-id", "Values": vpcs}]] if vpcs else [])
        for page in ec2.get_paginator("describe_network_interfaces").paginate(Filters=filters)
        for eni in page["NetworkInterfaces"]
    }
    going = _terminated(ec2, {instance for instance in enis.values() if instance})
    for eni_id, instance in enis.items():
        if instance not in going:  # still attached to a terminated instance: it goes with it
            yield "ec2:network-interface", eni_id, "network-interfaces", "present"
    for page in ec2.get_paginator("describe_volumes").paginate(Filters=run_filter):
        for volume in page["Volumes"]:
            yield "ec2:volume", volume["VolumeId"], "volumes", "present"
    yield from _in_run_network(ec2, vpcs, run_filter)
    yield from _schedule(session.client("scheduler"), run_id)


def _in_run_network(ec2: Any, vpcs: list[str], run_filter: list[dict[str, Any]]) -> Iterator[tuple[str, str, str, str]]:
    """What bills inside the run's VPCs whatever its tags say (an instance launched by hand, the NAT gateway),
    and the Elastic IPs of those NAT gateways or tagged with the run."""
    in_vpcs = [{"Name": "vpc-id", "Values": vpcs}]
    addresses: set[str] = set()
    if vpcs:
        live = [{"Name": "instance-state-name", "Values": list(NOT_GONE_STATES)}]
        for page in ec2.get_paginator("describe_instances").paginate(Filters=in_vpcs + live):
            for reservation in page["Reservations"]:
                for instance in reservation["Instances"]:
                    yield "ec2:instance", instance["InstanceId"], "run-network", "present"
        for page in ec2.get_paginator("describe_nat_gateways").paginate(Filters=in_vpcs):
            for gateway in page["NatGateways"]:
                if gateway.get("State") in ("deleted", "failed"):
                    continue
                state = "deleting" if gateway.get("State") == "deleting" else "present"
                yield "ec2:natgateway", gateway["NatGatewayId"], "run-network", state
                addresses |= {
                    a["AllocationId"] for a in gateway.get("NatGatewayAddresses", []) if a.get("AllocationId")
                }
    tagged = {a["AllocationId"] for a in ec2.describe_addresses(Filters=run_filter)["Addresses"] if "AllocationId" in a}
    for allocation in sorted(addresses | tagged):
        yield "ec2:elastic-ip", allocation, "addresses", "present"


def _schedule(scheduler: Any, run_id: str) -> Iterator[tuple[str, str, str, str]]:
    """The guard's one-time expiry schedule (schedules carry no tags, so the tagging API never lists it)."""
    try:
        schedule = scheduler.get_schedule(Name=guard.schedule_name(run_id))
    except ClientError as error:
        if error.response["Error"]["Code"] == "ResourceNotFoundException":
            return
        raise
    yield "scheduler:schedule", schedule.get("Arn") or guard.schedule_name(run_id), "schedules", "present"


def audit(run_id: str, session: Any = None) -> list[Leftover]:
    """Everything that still belongs to `run_id`, deduplicated across sources, sorted by kind."""
    session = session or boto3.session.Session()
    described = list(_described(session, run_id))
    confirmed = {_key(kind, ident) for kind, ident, _, _ in described}
    found: dict[tuple[str, str], Leftover] = {}
    deleting: set[tuple[str, str]] = set()
    for kind, ident, source, state in [*_tagged(session, run_id), *described]:
        key = _key(kind, ident)
        if kind in IGNORED or (kind in CONFIRMED_BY_DESCRIBE and key not in confirmed):
            continue
        if state == "deleting":
            deleting.add(key)
        if key not in found:
            found[key] = Leftover(kind, ident, source)
        elif source not in found[key].found_by.split("+"):
            found[key] = Leftover(kind, found[key].identifier, f"{found[key].found_by}+{source}")
    for key in deleting & found.keys():
        found[key] = Leftover(found[key].kind, found[key].identifier, f"{found[key].found_by}; {BEING_DELETED}")
    return sorted(found.values(), key=lambda left: (left.kind, left.identifier))


def render_leftovers(leftovers: list[Leftover], mark: str = "tag") -> str:
    """`mark`: what marks the run's resources, "tag" on AWS, "label" on GCP."""
    if not leftovers:
        return f"nothing left: no resource carries the run's {mark}"
    width = max(len(left.kind) for left in leftovers)
    lines = [f"{len(leftovers)} resource(s) left:"]
    lines += [f"  {left.kind:<{width}}  {left.identifier}  (found by {left.found_by})" for left in leftovers]
    return "\n".join(lines)


def checked_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not re.fullmatch(RUN_ID_PATTERN, run_id):
        raise InputError(
            Problem(
                "--run-id",
                f"{run_id!r} is not a run id: lowercase letters, digits and '-', "
                "1 to 40 characters, starting and ending with a letter or digit",
            )
        )
    return run_id


def audit_main(run_id: str, region: str | None, as_json: bool) -> int:
    """Print what the run left in an AWS region; 1 when anything is left, 0 when clean."""
    checked_run_id(run_id)
    session = boto3.session.Session(region_name=region)
    if not session.region_name:
        raise InputError(Problem("--region", "no AWS region: pass --region or set AWS_REGION"))
    problem = aws_region_problem(session.region_name)
    if problem:
        raise InputError(Problem("--region" if region else "AWS_REGION", problem))
    try:
        leftovers = audit(run_id, session)
    except NoCredentialsError:
        raise InputError(
            Problem("", "no AWS credentials: set AWS_PROFILE or the AWS_ACCESS_KEY_ID variables")
        ) from None
    except NoRegionError:
        raise InputError(Problem("--region", "no AWS region: pass --region or set AWS_REGION")) from None
    return print_leftovers(run_id, "region", session.region_name, leftovers, as_json, "tag")


def gcp_audit_main(run_id: str, project: str | None, as_json: bool) -> int:
    """Print what the run left in a GCP project; 1 when anything is left, 0 when clean."""
    from google.auth.exceptions import DefaultCredentialsError

    from infra.ops.lifecycle.gcp.cloud import GcpRunCloud

    checked_run_id(run_id)
    if not project:
        raise InputError(
            Problem(
                "--project",
                "required with --cloud gcp (or set GOOGLE_CLOUD_PROJECT): the project "
                "the run was in; nothing was checked",
            )
        )
    try:
        leftovers = GcpRunCloud(project, data_bucket="").audit(run_id)
    except DefaultCredentialsError:
        raise InputError(
            Problem(
                "",
                "no GCP credentials: run `gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS",
            )
        ) from None
    return print_leftovers(run_id, "project", project, leftovers, as_json, "label")


def print_leftovers(run_id: str, scope: str, where: str, leftovers: list[Leftover], as_json: bool, mark: str) -> int:
    if as_json:
        print(
            json.dumps(
                {
                    "run_id": run_id,
                    scope: where,
                    "clean": not leftovers,
                    "leftovers": [asdict(left) for left in leftovers],
                },
                indent=2,
            )
        )
    else:
        print(f"run {run_id} in {where}: {render_leftovers(leftovers, mark)}")
    return 1 if leftovers else 0
