"""Instances require IMDSv2 session tokens, answered only to the node itself: IMDSv1 lets any SSRF read the node
role's credentials, and a response hop limit above 1 lets every container on the node (one network hop
further) fetch them too."""

from __future__ import annotations

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.aws import INSTANCE, LAUNCH_TEMPLATE, number

NAME = "instance-metadata-requires-imdsv2"


def check(resource: Resource) -> list[str]:
    options = resource.get("metadataOptions")
    if is_unknown(options):
        return []
    if not isinstance(options, dict):
        return ["metadataOptions is not set, so instances accept IMDSv1; set metadataOptions.httpTokens to 'required'"]
    if options.get("httpEndpoint") == "disabled":
        return []
    findings = []
    hops = number(options.get("httpPutResponseHopLimit"))  # the analyzer protocol carries 2 as 2.0
    if isinstance(hops, int) and not isinstance(hops, bool) and hops > 1:
        findings.append(
            f"metadataOptions.httpPutResponseHopLimit is {hops}, so containers on the node reach the metadata "
            "service and the node role's credentials; set it to 1 (pods get theirs through Pod Identity)"
        )
    tokens = options.get("httpTokens")
    if tokens == "required" or is_unknown(tokens):
        return findings
    if tokens is None:
        return ["metadataOptions.httpTokens is not set, so instances accept IMDSv1; set it to 'required'", *findings]
    return [f"metadataOptions.httpTokens is '{tokens}', which accepts IMDSv1; set it to 'required'", *findings]


RULE = ResourceRule(
    NAME,
    "Launch templates and instances require IMDSv2 (httpTokens 'required') with a response hop limit of 1.",
    "mandatory",
    (LAUNCH_TEMPLATE, INSTANCE),
    check,
)
