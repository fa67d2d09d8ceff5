"""The `serving` stack kind on GCP (`mlinfra:cloud: gcp`): a private GKE cluster with an autoscaled L4
pool serving models from the registry bridge's GCS bucket, scaled on queue depth by KEDA as on AWS."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.serving.front_door import FrontDoor, FrontDoorArgs
from components.serving.gcp.addons import GkeAddons, GkeAddonsArgs
from components.serving.gcp.cluster import GkeCluster, GkeClusterArgs
from components.serving.gcp.image_mirror import GkeImageMirror, GkeImageMirrorArgs
from components.serving.gcp.model_server import GkeModelServer, GkeModelServerArgs
from components.serving.gcp.model_store import GcsModelStore
from components.serving.gcp.network import GkeNetwork, GkeNetworkArgs
from components.serving.gcp.node_pool import GkeNodePool, GkeNodePoolArgs
from components.serving.gcp.secret_reader import SecretReader, SecretReaderArgs
from infra.core.labels import gcp_labels
from infra.core.naming import slug
from infra.core.tags import contract_tags
from infra.serving import startup
from infra.serving.gcp import allocatable, front_door, gke
from infra.serving.gcp.config import GcpServingStackConfig


def build(config: GcpServingStackConfig) -> None:
    spec = config.serving
    stack = pulumi.get_stack()
    provider_config = pulumi.Config("gcp")
    project, region = provider_config.require("project"), provider_config.require("region")
    labels = gcp_labels(contract_tags("serving", stack))
    cluster_name = f"mlinfra-{slug(stack, 30)}"

    net = GkeNetwork("serving-net", GkeNetworkArgs(spec=spec.cluster.network, region=region))
    cluster = GkeCluster(
        "serving-gke",
        GkeClusterArgs(
            spec=spec.cluster,
            cluster_name=cluster_name,
            project=project,
            region=region,
            network_id=net.network.id,
            subnet_id=net.subnet.id,
            labels=labels,
        ),
    )
    accelerators = [gke.accelerator_plan(family, pool, region) for family, pool in spec.node_pools.declared().items()]
    # The system pool runs where the first accelerator pool does (L4's zones in the demo).
    plans = [gke.system_plan(accelerators[0].node_locations), *accelerators]
    pools = [
        GkeNodePool(
            f"pool-{plan.family}",
            GkeNodePoolArgs(
                plan=plan,
                cluster_id=cluster.cluster.id,
                region=region,
                service_account=cluster.node_account.email,
                labels=labels,
            ),
        )
        for plan in plans
    ]

    # The one Kubernetes provider of the stack: objects go to this cluster, never to an ambient kubeconfig.
    provider = k8s.Provider("serving-k8s", kubeconfig=cluster.kubeconfig)
    on_cluster = pulumi.ResourceOptions(providers={"kubernetes": provider})
    addons = GkeAddons("serving-addons", GkeAddonsArgs(workload_namespace=spec.namespace, after=pools), opts=on_cluster)
    store = GcsModelStore(spec.model_store.bucket, grants=spec.model_store.grant_read)
    mirror = (
        GkeImageMirror("image-mirror", GkeImageMirrorArgs(project=project, region=region, labels=labels))
        if spec.image_mirror.enabled
        else None
    )
    pools_of = spec.node_pools.declared()
    budgets = {
        m.name: startup.model_budgets(m, allocatable.holding_types(m, pools_of[m.accelerator].machine_types))
        for m in spec.models
    }
    for model in spec.models:
        pulumi.log.info(startup.describe(model.name, budgets[model.name]))
        if zero := startup.zero_summary(model, budgets[model.name]):
            pulumi.log.info(zero)
    servers = {
        model.name: GkeModelServer(
            f"model-{model.name}",
            GkeModelServerArgs(
                model=model,
                namespace=spec.namespace,
                project=project,
                store=store,
                region=region,
                after=[addons, *pools, *([mirror] if mirror else [])],
                mirror=mirror.cache if mirror else None,
                budgets=budgets[model.name],
            ),
            opts=on_cluster,
        )
        for model in spec.models
    }

    gateway = spec.gateway
    keys = gateway.api_keys_secret if gateway and gateway.auth == "api-key" else None
    reader = (
        SecretReader(
            "secret-reader",
            SecretReaderArgs(
                project=project, cluster_name=cluster_name, secrets=[gateway.tls_secret, *([keys] if keys else [])]
            ),
        )
        if gateway
        else None
    )
    door = FrontDoor(
        "front-door",
        FrontDoorArgs(
            gateway=gateway,
            models=spec.models,
            namespace=spec.namespace,
            envoy_service=front_door.envoy_service(gateway) if gateway else {},
            after=[addons],
            servers=list(servers.values()),
            mirror=mirror.cache if mirror else None,
            key_store=front_door.secret_store_provider(project) if gateway else None,
            api_keys_key=front_door.secret_id(keys) if keys else None,
            tls_key=front_door.secret_id(gateway.tls_secret) if gateway else None,
            key_reader=reader.grants if reader else [],
            secrets_account_annotations=reader.annotations if reader else {},
        ),
        opts=on_cluster,
    )

    pulumi.export("clusterName", cluster.cluster.name)
    pulumi.export("clusterEndpoint", cluster.cluster.endpoint)
    pulumi.export("kubeconfig", pulumi.Output.secret(cluster.kubeconfig))
    pulumi.export("modelBucket", store.bucket)
    if door.endpoint is not None:
        pulumi.export("endpoint", door.endpoint)
    if mirror:
        pulumi.export("imageMirror", mirror.cache.prefix)
    pulumi.export(
        "models",
        {
            name: {
                "service": f"http://{name}.{spec.namespace}.svc.cluster.local",
                "prefix": server.prefix,
                "account": server.account.email,
            }
            for name, server in servers.items()
        },
    )
