"""What a serving stack's front door is, on either cloud: one hostname, TLS, who may call it and how much.
Each cloud's config (aws/, gcp/) adds where its certificate and API keys live."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from infra.core.network import covers_internet, ipv4_cidr
from infra.core.spec import Spec

# RFC 1123 host name with at least two labels, lowercase (Gateway API's listener hostname, without wildcards: one
# endpoint per stack, named exactly, so its certificate is checked by name).
HOSTNAME_PATTERN = r"^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$"


class RateLimitSpec(Spec):
    requests_per_minute: int = Field(
        600,
        ge=1,
        le=1_000_000,
        description="Requests one API key may send per minute, over all models; more get HTTP 429.",
    )
    tokens_per_minute: int | None = Field(
        None,
        ge=1,
        le=1_000_000_000,
        description="Tokens (prompt + completion, as the model server's usage reports them) one API key may use "
        "per minute, over all models; a request past it gets HTTP 429. Unset: no token limit.",
    )


class GatewaySpec(Spec):
    hostname: str = Field(
        max_length=253,
        json_schema_extra={"pattern": HOSTNAME_PATTERN},
        description="The one DNS name clients call (https://<hostname>/v1/...), e.g. models.example.com: the "
        "certificate must cover it, and a DNS record for it must point at the gateway's load balancer.",
    )
    auth: Literal["api-key", "none"] = Field(
        "api-key",
        description="How callers are identified: 'api-key' (a key per client, sent as 'Authorization: Bearer "
        "<key>', kept in the cloud's secret store) or 'none' (asked for by name, and only with sourceCidrs).",
    )
    source_cidrs: list[str] = Field(
        default_factory=list,
        description="IPv4 CIDRs allowed to reach the endpoint (the load balancer refuses the rest). Empty: any "
        "address, which only auth 'api-key' allows.",
    )
    rate_limits: RateLimitSpec = Field(
        default_factory=RateLimitSpec, description="Per-key limits (with auth 'none', per source address)."
    )

    @field_validator("hostname", mode="before")
    @classmethod
    def _a_dns_name(cls, value: object) -> object:
        if isinstance(value, str) and not re.fullmatch(HOSTNAME_PATTERN, value):
            raise ValueError(
                f"{value!r} is not a DNS name: lowercase labels of letters, digits and '-' joined by dots, at least "
                "two labels, no wildcard, no scheme or port (e.g. models.example.com)"
            )
        return value

    @field_validator("source_cidrs")
    @classmethod
    def _cidrs(cls, values: list[str]) -> list[str]:
        for value in values:
            ipv4_cidr(value)
        if len(set(values)) != len(values):
            raise ValueError("lists a network twice")
        return values

    @property
    def open_to_anyone(self) -> bool:
        return not self.source_cidrs or covers_internet(self.source_cidrs)
