"""Network ranges every cloud's config checks the same way (pure)."""

from __future__ import annotations

import ipaddress


def private_cidr(value: str, low: int, high: int) -> str:
    """`value` if it is a private IPv4 CIDR with a prefix from /`low` to /`high`; else ValueError saying
    what to use (for pydantic field validators)."""
    try:
        network = ipaddress.IPv4Network(value, strict=True)
    except ValueError as error:
        raise ValueError(f"not an IPv4 CIDR: {error}") from None
    if not network.is_private:
        raise ValueError("use a private (RFC 1918) range")
    if not low <= network.prefixlen <= high:
        raise ValueError(f"use a /{low} to /{high}")
    return value
