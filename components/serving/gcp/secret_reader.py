"""The identity External Secrets reads the gateway's secrets with on GKE: its own Google service account, allowed
to access those secrets only (each secret's own IAM, no project role), acted as by External Secrets' Kubernetes
service account alone (Workload Identity)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.core.labels import account_id
from infra.serving import gateway_charts
from infra.serving.gcp import front_door, gke


@dataclass(frozen=True)
class SecretReaderArgs:
    project: str
    cluster_name: str
    secrets: Sequence[str]  # projects/<project>/secrets/<id>, each in the stack's project


class SecretReader(pulumi.ComponentResource):
    def __init__(self, name: str, args: SecretReaderArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:serving:SecretReader", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.account = gcp.serviceaccount.Account(
            f"{name}-account",
            account_id=account_id("secrets", args.cluster_name),
            display_name=f"External Secrets of {args.cluster_name}: reads the gateway's secrets only",
            opts=child,
        )
        member = self.account.email.apply(lambda email: f"serviceAccount:{email}")
        grants: list[pulumi.Resource] = [
            gcp.secretmanager.SecretIamMember(
                f"{name}-{front_door.secret_id(secret)}",
                project=args.project,
                secret_id=secret,
                role=front_door.SECRET_ACCESSOR,
                member=member,
                opts=child,
            )
            for secret in dict.fromkeys(args.secrets)
        ]
        grants.append(
            gcp.serviceaccount.IAMMember(
                f"{name}-workload-identity",
                service_account_id=self.account.name,
                role="roles/iam.workloadIdentityUser",
                member=gke.workload_member(
                    args.project, gateway_charts.SECRETS_NAMESPACE, gateway_charts.SECRETS_ACCOUNT
                ),
                opts=child,
            )
        )
        self.grants = grants
        self.annotations = {gke.WORKLOAD_IDENTITY_ANNOTATION: self.account.email}
        self.register_outputs({"account": self.account.email})
