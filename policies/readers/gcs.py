"""Resource types of Cloud Storage and Storage Transfer Service as rules read them (pulumi-gcp wire names)."""
from __future__ import annotations

GCS_BUCKET = "gcp:storage/bucket:Bucket"
TRANSFER_JOB = "gcp:storage/transferJob:TransferJob"
BUCKET_IAM_TYPES = ("gcp:storage/bucketIAMMember:BucketIAMMember", "gcp:storage/bucketIAMBinding:BucketIAMBinding")
PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")
