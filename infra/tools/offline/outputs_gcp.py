"""Plausible values for outputs the pulumi-gcp provider computes (ids, emails, self links, the cluster's
endpoint and CA), so dependent inputs (IAM members, the Kubernetes provider's kubeconfig) are readable
offline. Placeholders: the configured gcp:project and gcp:region, addresses in documentation ranges."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from infra.providers import tokens

OFFLINE_PROJECT = "offline-project"
OFFLINE_CA = base64.b64encode(
    b"-----BEGIN CERTIFICATE-----\noffline-preview-placeholder\n-----END CERTIFICATE-----\n"
).decode()


def _hash(text: str, n: int = 8) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def gcp_outputs(token: str, name: str, inputs: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    project = inputs.get("project") or config.get("gcp:project") or OFFLINE_PROJECT
    region = inputs.get("region") or inputs.get("location") or config.get("gcp:region") or "us-central1"
    physical = inputs.get("name") or f"{name}-{_hash(token + name, 7)}"
    kind = token.rsplit(":", 1)[-1]
    base = f"projects/{project}"
    out: dict[str, Any] = {"project": project}
    if token == tokens.GCP_SERVICEACCOUNT_ACCOUNT:
        account = inputs.get("accountId") or physical
        email = f"{account}@{project}.iam.gserviceaccount.com"
        out.update(
            email=email,
            name=f"{base}/serviceAccounts/{email}",
            member=f"serviceAccount:{email}",
            uniqueId=str(int(_hash(name, 12), 16)),
            id=f"{base}/serviceAccounts/{email}",
        )
    elif token == tokens.GCP_COMPUTE_NETWORK:
        out.update(
            name=physical,
            id=f"{base}/global/networks/{physical}",
            selfLink=f"https://www.googleapis.com/compute/v1/{base}/global/networks/{physical}",
        )
    elif token in (tokens.GCP_COMPUTE_SUBNETWORK, tokens.GCP_COMPUTE_ROUTER):
        collection = "subnetworks" if kind == "Subnetwork" else "routers"
        out.update(
            name=physical,
            id=f"{base}/regions/{region}/{collection}/{physical}",
            selfLink=f"https://www.googleapis.com/compute/v1/{base}/regions/{region}/{collection}/{physical}",
        )
    elif token == tokens.GCP_CONTAINER_CLUSTER:
        out.update(
            name=physical,
            id=f"{base}/locations/{region}/clusters/{physical}",
            endpoint="192.0.2.10",  # TEST-NET-1: a documentation address, never a real API server
            masterAuth={**(inputs.get("masterAuth") or {}), "clusterCaCertificate": OFFLINE_CA},
            selfLink=f"https://container.googleapis.com/v1/{base}/locations/{region}/clusters/{physical}",
        )
    elif token == tokens.GCP_CONTAINER_NODE_POOL:
        out.update(name=physical, instanceGroupUrls=[])
    elif token == tokens.GCP_LUSTRE_INSTANCE:  # TEST-NET-1 address: a placeholder, never a real server
        out.update(
            mountPoint=f"192.0.2.20@tcp:/{inputs.get('filesystem') or 'lustre'}",
            id=f"{base}/locations/{inputs.get('location') or region}/instances/{inputs.get('instanceId') or physical}",
        )
    elif token == tokens.GCP_COMPUTE_RESOURCE_POLICY:
        out.update(
            name=physical,
            id=f"{base}/regions/{region}/resourcePolicies/{physical}",
            selfLink=f"https://www.googleapis.com/compute/v1/{base}/regions/{region}/resourcePolicies/{physical}",
        )
    elif token == tokens.GCP_COMPUTE_INSTANCE:  # plausible addresses in the default ranges of training-gcp-demo
        out.update(
            name=physical,
            networkInterfaces=[
                {**nic, "networkIp": f"10.64.0.{10 + int(_hash(name, 2), 16) % 200}" if i == 0 else f"10.128.{i}.10"}
                for i, nic in enumerate(inputs.get("networkInterfaces") or [])
            ],
        )
    elif token == tokens.GCP_KMS_KEY_RING:
        out.update(name=physical, id=f"{base}/locations/{inputs.get('location') or region}/keyRings/{physical}")
    elif token == tokens.GCP_KMS_CRYPTO_KEY:
        out.update(
            name=physical,
            id=f"{inputs.get('keyRing') or base + '/locations/' + region + '/keyRings/x'}/cryptoKeys/{physical}",
        )
    elif token == tokens.GCP_STORAGE_BUCKET:
        out.update(
            name=physical,
            id=physical,
            url=f"gs://{physical}",
            selfLink=f"https://www.googleapis.com/storage/v1/b/{physical}",
        )
    elif token == tokens.GCP_PUBSUB_TOPIC:
        out.update(name=physical, id=f"{base}/topics/{physical}")
    elif token == tokens.GCP_PROJECTS_IAM_CUSTOM_ROLE:
        role = f"{base}/roles/{inputs.get('roleId') or physical}"
        out.update(name=role, id=role, deleted=False)
    elif token == tokens.GCP_CLOUDFUNCTIONSV2_FUNCTION:  # a Cloud Run function: its service carries its name
        location = inputs.get("location") or region
        url = f"https://{location}-{project}.cloudfunctions.net/{physical}"
        out.update(
            name=physical,
            id=f"{base}/locations/{location}/functions/{physical}",
            url=url,
            state="ACTIVE",
            environment="GEN_2",
            serviceConfig={
                **(inputs.get("serviceConfig") or {}),
                "service": f"{base}/locations/{location}/services/{physical}",
                "uri": url,
            },
        )
    elif token == tokens.GCP_CLOUDSCHEDULER_JOB:
        out.update(name=physical, id=f"{base}/locations/{region}/jobs/{physical}", state="ENABLED")
    elif token == tokens.GCP_STORAGE_NOTIFICATION:
        out.update(notificationId=str(int(_hash(token + name, 4), 16)))
    elif token == tokens.GCP_STORAGE_BUCKET_OBJECT:
        out.update(name=physical, id=f"{inputs.get('bucket')}-{physical}", generation=1)
    elif token == tokens.GCP_STORAGE_TRANSFER_JOB:
        out.update(name=f"transferJobs/{int(_hash(token + name, 12), 16)}")
    else:
        out.setdefault("name", physical)
    return out
