"""Plausible values for outputs the pulumi-gcp provider computes (ids, emails, self links, the cluster's
endpoint and CA), so dependent inputs (IAM members, the Kubernetes provider's kubeconfig) are readable
offline. Placeholders: the configured gcp:project and gcp:region, addresses in documentation ranges."""
from __future__ import annotations

import base64
import hashlib
from typing import Any

OFFLINE_PROJECT = "offline-project"
OFFLINE_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\noffline-preview-placeholder\n-----END CERTIFICATE-----\n").decode()


def _hash(text: str, n: int = 8) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def gcp_outputs(token: str, name: str, inputs: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    project = inputs.get("project") or config.get("gcp:project") or OFFLINE_PROJECT
    region = inputs.get("region") or inputs.get("location") or config.get("gcp:region") or "us-central1"
    physical = inputs.get("name") or f"{name}-{_hash(token + name, 7)}"
    kind = token.rsplit(":", 1)[-1]
    base = f"projects/{project}"
    out: dict[str, Any] = {"project": project}
    if token == "gcp:serviceaccount/account:Account":
        account = inputs.get("accountId") or physical
        email = f"{account}@{project}.iam.gserviceaccount.com"
        out.update(email=email, name=f"{base}/serviceAccounts/{email}", member=f"serviceAccount:{email}",
                   uniqueId=str(int(_hash(name, 12), 16)), id=f"{base}/serviceAccounts/{email}")
    elif token == "gcp:compute/network:Network":
        out.update(name=physical, id=f"{base}/global/networks/{physical}",
                   selfLink=f"https://www.googleapis.com/compute/v1/{base}/global/networks/{physical}")
    elif token in ("gcp:compute/subnetwork:Subnetwork", "gcp:compute/router:Router"):
        collection = "subnetworks" if kind == "Subnetwork" else "routers"
        out.update(name=physical, id=f"{base}/regions/{region}/{collection}/{physical}",
                   selfLink=f"https://www.googleapis.com/compute/v1/{base}/regions/{region}/{collection}/{physical}")
    elif token == "gcp:container/cluster:Cluster":
        out.update(name=physical, id=f"{base}/locations/{region}/clusters/{physical}",
                   endpoint="192.0.2.10",  # TEST-NET-1: a documentation address, never a real API server
                   masterAuth={**(inputs.get("masterAuth") or {}), "clusterCaCertificate": OFFLINE_CA},
                   selfLink=f"https://container.googleapis.com/v1/{base}/locations/{region}/clusters/{physical}")
    elif token == "gcp:container/nodePool:NodePool":
        out.update(name=physical, instanceGroupUrls=[])
    else:
        out.setdefault("name", physical)
    return out
