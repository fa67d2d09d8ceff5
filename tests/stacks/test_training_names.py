"""Every AWS name of a training stack fits its limit for the longest valid run id (40 characters): the names
set explicitly, and those Pulumi makes (the resource's name, '-' and 7 random characters). The limits are the
AWS API models' (tests/contracts/data/aws_name_limits.json, with source and date)."""

from __future__ import annotations

import gzip
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import botocore
import pytest

from infra.providers.schema import has_input
from infra.tools.offline.engine import preview
from infra.training.spec import RUN_ID_PATTERN
from tests.helpers import one

FACTS = json.loads(
    (Path(__file__).parents[1] / "contracts" / "data" / "aws_name_limits.json").read_text(encoding="utf-8")
)
LIMITS: dict[str, dict[str, Any]] = FACTS["limits"]
LONGEST = "r" + "-x" * 19 + "9"
AUTO_SUFFIX = 8  # "-" and 7 random characters
AZ = "us-east-1a"


@cache
def shapes(service: str, version: str) -> dict[str, Any]:
    path = Path(botocore.__file__).parent / "data" / service / version / "service-2.json.gz"
    model: dict[str, Any] = json.loads(gzip.open(path).read())
    return model["shapes"]


@pytest.mark.parametrize("token", sorted(LIMITS))
def test_each_limit_is_the_api_models(token):
    limit = LIMITS[token]
    model = shapes(limit["service"], limit["version"])
    if "shape" in limit:
        assert model[limit["shape"]]["max"] == limit["max"]
    else:
        request, member = limit["request"]
        words = re.sub(r"<[^>]+>", "", model[request]["members"][member]["documentation"])
        assert limit["says"] in words and str(limit["max"]) in limit["says"]


def test_the_longest_run_id_is_valid():
    assert len(LONGEST) == 40 and re.fullmatch(RUN_ID_PATTERN, LONGEST)
    assert not re.fullmatch(RUN_ID_PATTERN, LONGEST + "x")


def names(result) -> list[tuple[str, str, int, int]]:
    """(type, resource name, AWS name length, limit) of every created resource that has an AWS name."""
    found = []
    for step in result.resources():
        if not step.custom or step.op != "create" or not step.type.startswith("aws:"):
            continue
        limit = LIMITS.get(step.type)
        if limit is None:
            assert not has_input(step.type, "name"), f"{step.type} takes a name: add its limit to aws_name_limits.json"
            continue
        explicit = step.inputs.get(limit["property"])
        length = len(explicit) if explicit else len(step.name) + AUTO_SUFFIX
        found.append((step.type, explicit or f"{step.name}-xxxxxxx", length, limit["max"]))
    return found


@pytest.mark.parametrize(
    "capacity",
    [
        [],
        [
            ("mlinfra:training.availabilityZone", AZ),
            ("mlinfra:training.capacity.mode", "odcr"),
            ("mlinfra:training.capacity.reservationId", "cr-0123456789abcdef0"),
        ],
    ],
    ids=["on-demand", "odcr"],
)
def test_every_name_fits_its_limit_for_the_longest_run_id(capacity):
    result = preview("training-demo", [("mlinfra:training.runId", LONGEST), *capacity])
    assert result.errors == []
    found = names(result)
    too_long = [(token, name, length, limit) for token, name, length, limit in found if length > limit]
    assert too_long == []
    types = {token for token, *_ in found}
    assert {"aws:iam/role:Role", "aws:cloudwatch/eventRule:EventRule", "aws:lambda/function:Function"} <= types
    if capacity:
        assert one(result, "aws:resourcegroups/group:Group")
