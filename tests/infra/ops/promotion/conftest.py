"""The moto server fixtures of the lifecycle tests, reused here; a registry bucket for promotion; the directory of
the conversion tests' checkpoint and artefacts (one per session: the AWQ and conversion tests share them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.infra.ops.lifecycle.conftest import aws, moto_url  # noqa: F401  (fixtures)
from tests.infra.ops.promotion.standins import BUCKET, RUN_ID, seed_run


@pytest.fixture
def bucket(aws) -> str:  # noqa: F811
    """A versioned registry bucket holding run RUN_ID's checkpoints and its _SUCCESS marker."""
    aws.s3.create_bucket(Bucket=BUCKET)
    aws.s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    seed_run(lambda key, body: aws.s3.put_object(Bucket=BUCKET, Key=key, Body=body), RUN_ID)
    return BUCKET


@pytest.fixture(scope="session")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("conversion")
