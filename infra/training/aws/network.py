"""Address plan and port facts of a training network (pure, no pulumi)."""

from __future__ import annotations

import ipaddress

from infra.core.network import is_rfc1918

# FSx for Lustre: the file system and its clients talk on TCP 988 and 1018-1023, both ways
# (FSx for Lustre guide, "File system access control with Amazon VPC").
LUSTRE_PORT_RANGES: tuple[tuple[int, int], ...] = ((988, 988), (1018, 1023))

# With egress "endpoints" nodes reach AWS only: SSM (sessions), ECR (images), CloudWatch Logs, STS.
# S3 always goes through the gateway endpoint.
INTERFACE_ENDPOINT_SERVICES: tuple[str, ...] = (
    "ssm",
    "ssmmessages",
    "ec2messages",
    "ecr.api",
    "ecr.dkr",
    "logs",
    "sts",
)

MIN_PREFIX, MAX_PREFIX = 16, 22


def cidr_problem(cidr: str) -> str | None:
    try:
        network = ipaddress.IPv4Network(cidr, strict=True)
    except ValueError as error:
        return f"{cidr!r} is not an IPv4 network in CIDR form such as 10.64.0.0/16 ({error})"
    if not MIN_PREFIX <= network.prefixlen <= MAX_PREFIX:
        return (
            f"prefix /{network.prefixlen} is out of range: use /{MIN_PREFIX} to /{MAX_PREFIX} (a node takes one "
            f"IP; the file system a few)"
        )
    if not is_rfc1918(network):
        return f"{cidr} is not a private range (RFC 1918), e.g. 10.64.0.0/16"
    return None


def subnet_cidrs(cidr: str) -> tuple[str, str]:
    """(private subnet, public NAT subnet): the first quarter of the VPC for the nodes and the file
    system, the last /28 for the NAT gateway."""
    network = ipaddress.IPv4Network(cidr, strict=True)
    private = next(network.subnets(new_prefix=network.prefixlen + 2))
    public = list(network.subnets(new_prefix=28))[-1]
    return str(private), str(public)
