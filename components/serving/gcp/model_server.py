"""One model server on GKE: its own GCP service account (read-only on the model bucket, reached through
Workload Identity) and the same Kubernetes objects as on EKS (components/serving/model_server_objects.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from components.aliases import aliased
from components.serving.gcp.model_store import GcsModelStore
from components.serving.model_server_objects import declare_model_objects
from infra.core.labels import account_id
from infra.serving import manifests
from infra.serving.gcp import gke
from infra.serving.gcp.config import GcpModelSpec
from infra.serving.images import ImageSource
from infra.serving.startup import StartupBudget


@dataclass(frozen=True)
class GkeModelServerArgs:
    model: GcpModelSpec
    namespace: str
    project: str
    store: GcsModelStore
    region: str
    after: Sequence[pulumi.Resource] = field(default_factory=list)  # add-ons: KEDA CRDs, namespace, node pools
    mirror: ImageSource | None = None  # the Docker Hub cache the nodes pull through; None: as the entry names it
    budgets: Mapping[str, StartupBudget] = field(default_factory=dict)  # start-up on each type that holds a replica


class GkeModelServer(pulumi.ComponentResource):
    """Kubernetes objects use the provider passed in opts.providers."""

    def __init__(self, name: str, args: GkeModelServerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(
            "mlinfra:serving:GkeModelServer", name, None, aliased(opts, "mlinfra:gke_model_server:GkeModelServer")
        )
        model, ns = args.model, args.namespace
        self.prefix = manifests.artefact_prefix(model)
        self.account = gcp.serviceaccount.Account(
            f"{name}-account",
            account_id=account_id("model", model.name),
            display_name=f"model server {model.name}: reads gs://{args.store.bucket}/ only",
            opts=pulumi.ResourceOptions(parent=self),
        )
        member = self.account.email.apply(lambda email: f"serviceAccount:{email}")
        read = args.store.grant_read(f"{name}-read", member, self)
        # The Kubernetes service account <ns>/<model> may act as the GCP account (and nothing else may).
        binding = gcp.serviceaccount.IAMMember(
            f"{name}-workload-identity",
            service_account_id=self.account.name,
            role="roles/iam.workloadIdentityUser",
            member=gke.workload_member(args.project, ns, model.name),
            opts=pulumi.ResourceOptions(parent=self),
        )
        location = manifests.Registry(bucket=args.store.bucket, region=args.region, scheme="gs", mirror=args.mirror)
        identity = [grant for grant in (read, binding) if grant is not None]
        objects = declare_model_objects(
            name,
            model,
            ns,
            location,
            self,
            args.after,
            identity=identity,
            account_annotations={gke.WORKLOAD_IDENTITY_ANNOTATION: self.account.email},
            budgets=args.budgets,
        )
        self.deployment, self.service, self.scaled_object = objects.deployment, objects.service, objects.scaled_object
        self.register_outputs(
            {"prefix": self.prefix, "account": self.account.email, "service": f"{model.name}.{ns}.svc.cluster.local"}
        )
