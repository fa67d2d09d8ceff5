"""`ObjectStore` on S3 with boto3 (honours AWS_ENDPOINT_URL, so an emulator works too)."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.exceptions import ClientError

from infra.ops.promotion.ports import Conflict, StoredObject

MISSING = ("NoSuchKey", "404", "NotFound")
# A condition that did not hold; 409 when a concurrent conditional write won the race; NoSuchKey when an
# If-Match target is gone.
CONFLICTS = ("PreconditionFailed", "412", "ConditionalRequestConflict", "409", *MISSING)


class S3Store:
    def __init__(self, bucket: str, region: str | None = None, session: Any = None):
        self.bucket = bucket
        self._s3 = (session or boto3.session.Session(region_name=region)).client("s3")

    def get(self, key: str) -> bytes | None:
        try:
            return self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as error:
            if error.response["Error"]["Code"] in MISSING:
                return None
            raise

    def read(self, key: str) -> tuple[bytes, str] | None:
        try:
            answer = self._s3.get_object(Bucket=self.bucket, Key=key)
        except ClientError as error:
            if error.response["Error"]["Code"] in MISSING:
                return None
            raise
        return answer["Body"].read(), answer["ETag"]

    def put(self, key: str, body: bytes, **conditions: Any) -> None:
        # Encryption comes from the bucket's default (SSE-KMS with the registry key).
        try:
            self._s3.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType="application/json", **conditions)
        except ClientError as error:
            if conditions and error.response["Error"]["Code"] in CONFLICTS:
                raise Conflict(f"s3://{self.bucket}/{key}: {error.response['Error']['Code']}") from None
            raise

    def put_new(self, key: str, body: bytes) -> None:
        self.put(key, body, IfNoneMatch="*")

    def put_if_match(self, key: str, body: bytes, etag: str) -> None:
        self.put(key, body, IfMatch=etag)

    def list(self, prefix: str) -> list[StoredObject]:
        found = []
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                found.append(
                    StoredObject(item["Key"], item["Size"], item["LastModified"].strftime("%Y-%m-%dT%H:%M:%SZ"))
                )
        return found
