"""Network ranges every cloud's config checks the same way (pure)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

# RFC 1918: the only ranges a private network may use. Python's `is_private` also takes loopback, link-local
# (169.254/16, the metadata service's), 0.0.0.0/8 and other special ranges, which a VPC must never be.
RFC1918 = tuple(ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))


def is_rfc1918(network: ipaddress.IPv4Network) -> bool:
    return any(network.subnet_of(block) for block in RFC1918)


def private_cidr(value: str, low: int, high: int) -> str:
    """`value` if it is a private IPv4 CIDR with a prefix from /`low` to /`high`; else ValueError saying
    what to use (for pydantic field validators)."""
    try:
        network = ipaddress.IPv4Network(value, strict=True)
    except ValueError as error:
        raise ValueError(f"not an IPv4 CIDR: {error}") from None
    if not is_rfc1918(network):
        raise ValueError("use a private (RFC 1918) range: within 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16")
    if not low <= network.prefixlen <= high:
        raise ValueError(f"use a /{low} to /{high}")
    return value


def ipv4_cidr(value: str) -> str:
    """`value` if it is an IPv4 CIDR (host bits clear); else ValueError naming it (for pydantic validators)."""
    try:
        ipaddress.IPv4Network(value, strict=True)
    except ValueError as error:
        raise ValueError(f"{value!r} is not an IPv4 CIDR: {error}") from None
    return value


def covers_internet(cidrs: Iterable[object]) -> bool:
    """Whether `cidrs` (strings; anything unparsable ignored) reach every IPv4 address: a /0, or ranges that
    together make 0.0.0.0/0 (0.0.0.0/1 and 128.0.0.0/1), so a split list counts as what it is."""
    networks = []
    for value in cidrs:
        if not isinstance(value, str):
            continue
        try:
            networks.append(ipaddress.ip_network(value, strict=False))
        except ValueError:
            continue
    v4 = [n for n in networks if isinstance(n, ipaddress.IPv4Network)]
    return any(n.prefixlen == 0 for n in networks) or list(ipaddress.collapse_addresses(v4)) == [
        ipaddress.IPv4Network("0.0.0.0/0")
    ]
