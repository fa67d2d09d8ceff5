"""Resource types of Cloud Storage and Storage Transfer Service as rules read them (pulumi-gcp wire names)."""

from __future__ import annotations

from infra.providers import tokens

GCS_BUCKET = tokens.GCP_STORAGE_BUCKET
TRANSFER_JOB = tokens.GCP_STORAGE_TRANSFER_JOB
BUCKET_IAM_TYPES = (tokens.GCP_STORAGE_BUCKET_IAM_MEMBER, tokens.GCP_STORAGE_BUCKET_IAM_BINDING)
PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")
