"""Read access to the GCS bucket that holds the models GKE serves (the registry bridge's mirror of the
registry's models/ prefix). Grants live here, with the thing granted."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

OBJECT_VIEWER = "roles/storage.objectViewer"  # get and list objects; no writes, no bucket settings


@dataclass(frozen=True)
class GcsModelStore:
    bucket: str
    grants: bool = True  # False: the bucket's own stack (the registry's mirror) owns the read grants

    def grant_read(
        self, name: str, member: pulumi.Input[str], parent: pulumi.Resource
    ) -> gcp.storage.BucketIAMMember | None:
        """Read-only on the bucket, or None when the bucket's stack grants it. GCS cannot scope object
        listing to a prefix through IAM conditions, so the grant is bucket-wide; the bucket holds models/
        only (the bridge copies nothing else)."""
        if not self.grants:
            return None
        return gcp.storage.BucketIAMMember(
            name, bucket=self.bucket, role=OBJECT_VIEWER, member=member, opts=pulumi.ResourceOptions(parent=parent)
        )
