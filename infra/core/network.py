"""Network ranges every cloud's config checks the same way (pure)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

# RFC 1918: the only ranges a private network may use. Python's `is_private` also takes loopback, link-local
# (169.254/16, the metadata service's), 0.0.0.0/8 and other special ranges, which a VPC must never be.
RFC1918 = tuple(ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))


def is_rfc1918(network: ipaddress.IPv4Network) -> bool:
    return any(network.subnet_of(block) for block in RFC1918)


# Addresses no source on the internet has: RFC 1918, shared address space (RFC 6598, carrier NAT), loopback and
# link-local.
UNROUTED = (*RFC1918, *(ipaddress.IPv4Network(n) for n in ("100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16")))


def private_range(network: ipaddress.IPv4Network) -> bool:
    """Whether every address of `network` is one no internet source has."""
    return any(network.subnet_of(block) for block in UNROUTED)


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


# Where callers on the internet come from: IPv4 less the special-purpose ranges no internet host has (IANA's
# special-purpose registry, RFC 6890: this network, private, shared CGN, loopback, link-local, IETF protocol
# assignments, the documentation nets, the 6to4 relay, benchmarking, multicast and the reserved 240/4), and IPv6's
# global unicast 2000::/3.
_NOT_PUBLIC_V4 = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/3",
    )
)


def _public_v4() -> tuple[ipaddress.IPv4Network, ...]:
    blocks = [ipaddress.IPv4Network("0.0.0.0/0")]
    for hole in _NOT_PUBLIC_V4:
        kept: list[ipaddress.IPv4Network] = []
        for block in blocks:
            kept += list(block.address_exclude(hole)) if hole.subnet_of(block) else [block]
        blocks = kept
    return tuple(ipaddress.collapse_addresses(blocks))


Network = ipaddress.IPv4Network | ipaddress.IPv6Network
PUBLIC: dict[int, tuple[Network, ...]] = {4: _public_v4(), 6: (ipaddress.IPv6Network("2000::/3"),)}
PUBLIC_SIZE = {v: sum(b.num_addresses for b in blocks) for v, blocks in PUBLIC.items()}
# A list that admits more than this share of the public space (for IPv4 about a /8: 14.6 million addresses) is the
# internet at large: no set of administrators, runners or offices needs it, and the rest is what an attacker needs.
OPEN_SHARE = 1 / 256


def public_addresses(cidrs: Iterable[object], version: int) -> int:
    """How many public addresses of IP `version` the CIDRs (strings; anything unparsable ignored) admit together."""
    networks: list[Network] = []
    for value in cidrs:
        if not isinstance(value, str):
            continue
        try:
            network = ipaddress.ip_network(value, strict=False)
        except ValueError:
            continue
        if network.version == version:
            networks.append(network)
    total = 0
    # Collapsed, the networks are disjoint, as the public blocks are; two CIDR blocks either nest or are apart.
    for network in ipaddress.collapse_addresses(networks):  # type: ignore[type-var]
        for block in PUBLIC[version]:
            if network.subnet_of(block):  # type: ignore[arg-type]
                total += network.num_addresses
            elif block.subnet_of(network):  # type: ignore[arg-type]
                total += block.num_addresses
    return total


def covers_internet(cidrs: Iterable[object]) -> bool:
    """Whether `cidrs` together admit the internet at large: more than OPEN_SHARE of the public IPv4 or IPv6 space,
    however it is spelt (0.0.0.0/0, its halves, the internet less the private ranges, most of it in pieces)."""
    values = list(cidrs)
    return any(public_addresses(values, v) > PUBLIC_SIZE[v] * OPEN_SHARE for v in PUBLIC)


def public_reach(cidrs: Iterable[object]) -> str:
    """The public addresses `cidrs` admit, in words, for messages."""
    values = list(cidrs)
    v4, v6 = public_addresses(values, 4), public_addresses(values, 6)
    parts = [f"{v4:,} public IPv4 addresses ({v4 / PUBLIC_SIZE[4]:.1%} of them)"] if v4 else []
    parts += [f"{v6 / PUBLIC_SIZE[6]:.1%} of the public IPv6 space"] if v6 else []
    return " and ".join(parts) or "no public address"
