"""A data repository association links an S3 path (s3://bucket/prefix/) to an absolute file system path."""

from __future__ import annotations

from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.aws import DRA

NAME = "lustre-data-repository-paths-in-s3"


def check(resource: Resource) -> list[str]:
    problems = []
    repository, path = resource.get("dataRepositoryPath"), resource.get("fileSystemPath")
    if not is_unknown(repository) and not (isinstance(repository, str) and repository.startswith("s3://")):
        problems.append(f"dataRepositoryPath {repository!r} is not an S3 path; use s3://<registry bucket>/<prefix>/")
    if not is_unknown(path) and not (isinstance(path, str) and path.startswith("/")):
        problems.append(f"fileSystemPath {path!r} is not absolute; use a path such as /datasets")
    return problems


RULE = ResourceRule(
    NAME, "Data repository associations link s3:// paths to absolute file system paths.", "mandatory", (DRA,), check
)
