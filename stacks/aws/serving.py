"""The `serving` stack kind: a long-lived EKS fleet on inf2 and GPU pools that serves released registry models."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.registry.aws.access import RegistryAccess
from components.serving.aws.addons import ClusterAddons, ClusterAddonsArgs
from components.serving.aws.api_key_reader import ApiKeyReader, ApiKeyReaderArgs
from components.serving.aws.device_plugins import DevicePlugins, DevicePluginsArgs
from components.serving.aws.eks_cluster import EksCluster, EksClusterArgs
from components.serving.aws.image_mirror import ImageMirror, ImageMirrorArgs
from components.serving.aws.load_balancer_controller import LoadBalancerController, LoadBalancerControllerArgs
from components.serving.aws.model_converter import ModelConverter, ModelConverterArgs
from components.serving.aws.model_server import ModelServer, ModelServerArgs
from components.serving.aws.node_pool import ServingNodePool, ServingNodePoolArgs
from components.serving.aws.vpc import ServingVpc, ServingVpcArgs
from components.serving.front_door import FrontDoor, FrontDoorArgs
from infra.core.naming import slug
from infra.core.tags import contract_tags
from infra.serving import manifests, startup
from infra.serving.aws import converter_access as conversion_access
from infra.serving.aws import front_door, node_pools, zones
from infra.serving.aws.config import ServingStackConfig


def build(config: ServingStackConfig) -> None:
    spec = config.serving
    stack = pulumi.get_stack()
    tags = contract_tags("serving", stack)
    region = aws.get_region().region
    found_partition = aws.get_partition()
    partition = found_partition.partition
    account_id = aws.get_caller_identity().account_id
    # The account's zones (Local and Wavelength Zones left out), by name and ID: the choice is made on IDs.
    found_zones = aws.get_availability_zones(
        state="available",
        filters=[aws.GetAvailabilityZonesFilterArgs(name="opt-in-status", values=["opt-in-not-required"])],
    )
    declared = spec.node_pools.declared()
    zone_plan = zones.choose_zones(
        region,
        [zones.Zone(name, zone_id) for name, zone_id in zip(found_zones.names, found_zones.zone_ids, strict=True)],
        {zones.SYSTEM_POOL: node_pools.SYSTEM_INSTANCE_TYPES, **{f: p.instance_types for f, p in declared.items()}},
        spec.cluster.availability_zones,
        pinned=spec.cluster.availability_zone_ids or (),
    )
    pulumi.log.info(
        "zones: "
        + ", ".join(f"{z.zone_id} ({z.name})" for z in zone_plan.zones)
        + "; "
        + "; ".join(f"{pool} in {', '.join(zone_plan.pool_zone_ids(pool))}" for pool in zone_plan.slots)
    )
    cluster_name = f"mlinfra-{slug(stack, 60)}"

    vpc = ServingVpc(
        "serving-net", ServingVpcArgs(cidr=spec.cluster.vpc_cidr, zones=zone_plan.zones, tags=tags, region=region)
    )
    cluster = EksCluster(
        "serving-eks",
        EksClusterArgs(
            spec=spec.cluster,
            cluster_name=cluster_name,
            subnet_ids=vpc.private_subnet_ids,
            region=region,
            tags=tags,
            partition=partition,
        ),
    )
    plans = [
        *node_pools.system_plans(),
        *(
            plan
            for family, pool in declared.items()
            for plan in node_pools.accelerator_plans(family, pool, node_pools.replicas_of(spec.models, family))
        ),
    ]
    # Node groups name the cluster, so Pulumi deletes them (draining their nodes) before the cluster.
    pools = [
        ServingNodePool(
            plan.name,
            ServingNodePoolArgs(
                plan=plan,
                cluster_name=cluster.name,
                node_role_arn=cluster.node_role.arn,
                # Only the zones that offer every size of the pool: a group never waits on a zone without its type.
                subnet_ids=[vpc.private_subnet_ids[i] for i in zone_plan.slots[plan.family]],
                tags=tags,
            ),
            opts=pulumi.ResourceOptions(depends_on=cluster.bootstrap_addons),
        )
        for plan in plans
    ]

    # The one provider of the stack: Kubernetes objects go to this cluster, never to an ambient kubeconfig.
    provider = k8s.Provider("serving-k8s", kubeconfig=cluster.kubeconfig)
    on_cluster = pulumi.ResourceOptions(providers={"kubernetes": provider})
    addons = ClusterAddons(
        "serving-addons",
        ClusterAddonsArgs(
            cluster_name=cluster.name,
            cluster_name_plain=cluster_name,
            region=region,
            kubernetes_version=spec.cluster.kubernetes_version,
            workload_namespace=spec.namespace,
            tags=tags,
            after=pools,
            expander_priorities=node_pools.expander_priorities(plans),
        ),
        opts=on_cluster,
    )
    plugins = DevicePlugins(
        "device-plugins",
        DevicePluginsArgs(kubernetes_version=spec.cluster.kubernetes_version, after=pools),
        opts=on_cluster,
    )

    images = (
        ImageMirror(
            "image-mirror",
            ImageMirrorArgs(
                account_id=account_id,
                region=region,
                partition=partition,
                dns_suffix=found_partition.dns_suffix,
                node_role_name=cluster.node_role.name,
                docker_hub_credential_arn=spec.image_mirror.docker_hub_credential_arn,
            ),
        )
        if spec.image_mirror.enabled
        else None
    )
    mirror = images.mirror if images else None

    registry = pulumi.StackReference(config.registry_stack)
    location = pulumi.Output.all(registry.require_output("bucketName"), registry.require_output("region")).apply(
        lambda values: manifests.Registry(bucket=values[0], region=values[1], mirror=mirror)
    )
    access = RegistryAccess.from_stack_reference(registry)
    budgets = {
        m.name: startup.model_budgets(m, node_pools.holding_types(m, declared[m.accelerator])) for m in spec.models
    }
    for model in spec.models:
        pulumi.log.info(startup.describe(model.name, budgets[model.name]))
        if zero := startup.zero_summary(model, budgets[model.name]):
            pulumi.log.info(zero)
    servers = {
        model.name: ModelServer(
            f"model-{model.name}",
            ModelServerArgs(
                model=model,
                namespace=spec.namespace,
                cluster_name=cluster.name,
                registry=access,
                registry_location=location,
                tags=tags,
                after=[addons, plugins, *([images] if images else [])],
                budgets=budgets[model.name],
            ),
            opts=on_cluster,
        )
        for model in spec.models
    }
    # The front door: the NLB (TLS, source networks) -> Envoy (API keys, limits, route by model) -> the model's pool.
    balancer = (
        [
            LoadBalancerController(
                "load-balancer-controller",
                LoadBalancerControllerArgs(
                    cluster_name=cluster.name,
                    cluster_name_plain=cluster_name,
                    region=region,
                    account_id=account_id,
                    partition=partition,
                    vpc_id=vpc.vpc.id,
                    tags=tags,
                    after=pools,
                ),
                opts=on_cluster,
            )
        ]
        if spec.gateway
        else []
    )
    keys = spec.gateway.api_keys_secret_arn if spec.gateway else None
    key_reader = (
        [
            ApiKeyReader(
                "api-key-reader",
                ApiKeyReaderArgs(
                    cluster_name=cluster.name, cluster_name_plain=cluster_name, secret_arn=keys, tags=tags
                ),
            ).identity
        ]
        if keys
        else []
    )
    door = FrontDoor(
        "front-door",
        FrontDoorArgs(
            gateway=spec.gateway,
            models=spec.models,
            namespace=spec.namespace,
            envoy_service=front_door.envoy_service(spec.gateway) if spec.gateway else {},
            after=[addons, *balancer],
            servers=list(servers.values()),
            mirror=mirror,
            key_store=front_door.secret_store_provider(keys) if keys else None,
            api_keys_key=keys,
            key_reader=key_reader,
        ),
        opts=on_cluster,
    )

    # The identity of `python -m infra promote`'s conversion Jobs (each down-scopes it to its own prefixes).
    converter = ModelConverter(
        "model-converter",
        ModelConverterArgs(
            role_name=conversion_access.role_name(stack),
            partition=partition,
            account_id=account_id,
            namespace=spec.namespace,
            cluster_name=cluster.name,
            registry=access,
            tags=tags,
            after=[addons],
        ),
        opts=on_cluster,
    )

    pulumi.export("clusterName", cluster.name)
    pulumi.export("clusterEndpoint", cluster.cluster.endpoint)
    pulumi.export("kubeconfig", cluster.kubeconfig)
    pulumi.export(
        "models",
        {
            name: {
                "service": f"http://{name}.{spec.namespace}.svc.cluster.local",
                "prefix": server.prefix,
                "roleArn": server.role.arn,
            }
            for name, server in servers.items()
        },
    )
    pulumi.export("converterRoleArn", converter.role.arn)
    pulumi.export("endpoint", door.endpoint)
    # promote runs its Jobs' images through the same mirror.
    pulumi.export("imageMirror", {"host": mirror.host, "upstreams": list(mirror.upstreams)} if mirror else None)
