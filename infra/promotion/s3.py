"""`ObjectStore` on S3 with boto3 (honours AWS_ENDPOINT_URL, so an emulator works too)."""
from __future__ import annotations

from typing import Any, Optional

import boto3
from botocore.exceptions import ClientError

from infra.promotion.ports import StoredObject

MISSING = ("NoSuchKey", "404", "NotFound")


class S3Store:
    def __init__(self, bucket: str, region: Optional[str] = None, session: Any = None):
        self.bucket = bucket
        self._s3 = (session or boto3.session.Session(region_name=region)).client("s3")

    def get(self, key: str) -> Optional[bytes]:
        try:
            return self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as error:
            if error.response["Error"]["Code"] in MISSING:
                return None
            raise

    def put(self, key: str, body: bytes) -> None:
        # Encryption comes from the bucket's default (SSE-KMS with the registry key).
        self._s3.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType="application/json")

    def list(self, prefix: str) -> list[StoredObject]:
        found = []
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                found.append(StoredObject(item["Key"], item["Size"],
                                          item["LastModified"].strftime("%Y-%m-%dT%H:%M:%SZ")))
        return found
