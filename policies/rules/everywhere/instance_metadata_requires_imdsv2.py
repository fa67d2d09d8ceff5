"""Instances require IMDSv2 session tokens: IMDSv1 lets any SSRF read the node role's credentials."""

from __future__ import annotations

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.aws import INSTANCE, LAUNCH_TEMPLATE

NAME = "instance-metadata-requires-imdsv2"


def check(resource: Resource) -> list[str]:
    options = resource.get("metadataOptions")
    if is_unknown(options):
        return []
    if not isinstance(options, dict):
        return ["metadataOptions is not set, so instances accept IMDSv1; set metadataOptions.httpTokens to 'required'"]
    if options.get("httpEndpoint") == "disabled":
        return []
    tokens = options.get("httpTokens")
    if tokens == "required" or is_unknown(tokens):
        return []
    if tokens is None:
        return ["metadataOptions.httpTokens is not set, so instances accept IMDSv1; set it to 'required'"]
    return [f"metadataOptions.httpTokens is '{tokens}', which accepts IMDSv1; set it to 'required'"]


RULE = ResourceRule(
    NAME,
    "Launch templates and instances require IMDSv2 (httpTokens 'required').",
    "mandatory",
    (LAUNCH_TEMPLATE, INSTANCE),
    check,
)
