"""`aws:region` must be a region AWS has: the SDK's own partition table at the pinned botocore, not a pattern."""

from __future__ import annotations

from infra.cli import main
from infra.core.providers import aws_provider_findings, aws_regions


def test_every_partitions_regions_and_no_pseudo_regions():
    regions = aws_regions()
    assert {"us-east-1", "af-south-1", "us-gov-west-1", "cn-north-1"} <= set(regions)
    assert not [r for r in regions if r.endswith("-global")]


def test_a_region_that_does_not_exist_is_refused_naming_the_key(capsys):
    assert aws_provider_findings({"aws:region": "af-south-1"}) == []
    assert main(["preview", "--stack", "registry", "-c", "aws:region=us-foo-9"]) == 2
    assert capsys.readouterr().err.startswith(
        "error: aws:region: us-foo-9 is not an AWS region (the pinned botocore's partitions.json lists af-south-1, "
    )
