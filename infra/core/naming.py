"""Names that AWS and Google Cloud constrain, computed and checked without the cloud."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_IP = re.compile(r"\d+\.\d+\.\d+\.\d+")
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d+")


def first_group(pattern: str, name: str) -> str:
    """The first group of `pattern` in `name` (an ARN's region, a resource name's project); ValueError when `name`
    does not match `pattern`."""
    match = re.fullmatch(pattern, name)
    if match is None:
        raise ValueError(f"{name!r} does not match {pattern}")
    return match.group(1)


def bucket_name_problem(name: str) -> str | None:
    """Why `name` is not a valid general-purpose S3 bucket name, or None if it is (S3 naming rules)."""
    if not _BUCKET.fullmatch(name):
        return "3-63 characters of a-z, 0-9, '.' and '-', starting and ending with a letter or digit"
    if ".." in name or ".-" in name or "-." in name:
        return "no two adjacent periods, and no period next to a hyphen"
    if _IP.fullmatch(name):
        return "must not be formatted as an IP address"
    for prefix in ("xn--", "sthree-", "amzn-s3-demo-"):
        if name.startswith(prefix):
            return f"must not start with '{prefix}'"
    for suffix in ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"):
        if name.endswith(suffix):
            return f"must not end with '{suffix}'"
    return None


# Cloud Storage bucket naming (cloud.google.com/storage/docs/buckets#naming, as of 2026-11-27): names cannot begin
# with the "goog" prefix, and cannot contain "google" or close misspellings such as "g00gle".
_GOOGLE = re.compile(r"g[o0][o0]g[l1]e")


def gcs_bucket_name_problem(name: str) -> str | None:
    """Why Cloud Storage refuses a bucket `name` for its reserved words, or None (the character rules are each
    field's pattern)."""
    if name.startswith("goog"):
        return "must not begin with 'goog' (Cloud Storage reserves the prefix)"
    # A dotted name is a domain: each dot-separated part is a DNS label (no empty part, none starting or ending
    # with '-', 63 characters at most), and the bootstrap's own check of the marker bucket refuses the same.
    parts = name.split(".")
    if any(not p or p.startswith("-") or p.endswith("-") or len(p) > 63 for p in parts) and len(parts) > 1:
        return (
            "each dot-separated part must be 1-63 characters, not starting or ending with '-' (no '..', '.-' or '-.')"
        )
    if _IP.fullmatch(name):
        return "must not be formatted as an IP address"
    found = _GOOGLE.search(name)
    if found:
        return f"must not contain '{found.group(0)}' (Cloud Storage refuses 'google' and close misspellings)"
    return None


# A Cloud Storage bucket name's characters, as the config fields' pattern and the bootstrap check it.
GCS_BUCKET_PATTERN = r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$"


def gcs_bucket_problem(name: str) -> str | None:
    """Why `name` is not a Cloud Storage bucket name mlinfra accepts (its characters, then the reserved words and
    dotted parts), or None."""
    if not re.fullmatch(GCS_BUCKET_PATTERN, name):
        return "3-63 characters of a-z, 0-9, '.', '_' and '-', starting and ending with a letter or digit"
    return gcs_bucket_name_problem(name)


def _checked_gcs_bucket_name(name: str) -> str:
    problem = gcs_bucket_name_problem(name)
    if problem:
        raise ValueError(problem)
    return name


# A config field naming a Cloud Storage bucket: its own Field pattern checks the characters, this the reserved words.
GcsBucketName = Annotated[str, AfterValidator(_checked_gcs_bucket_name)]


def registry_bucket_name(prefix: str, account_id: str, region: str) -> str:
    """Globally unique default name: `<prefix>-<account>-<region>`, e.g. mlinfra-registry-123456789012-us-east-1."""
    name = f"{prefix}-{account_id}-{region}".lower()
    problem = bucket_name_problem(name)
    if problem:
        raise ValueError(f"bucket name {name!r} is invalid: {problem}")
    return name


def slug(text: str, max_len: int = 40) -> str:
    """A resource-name-safe form of free text: lowercase, [a-z0-9-], no leading/trailing/double hyphens."""
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s[:max_len].rstrip("-") or "x"


def is_region_name(value: object) -> bool:
    """True for AWS region names such as us-east-1 or ap-southeast-2."""
    return isinstance(value, str) and _REGION.fullmatch(value) is not None
