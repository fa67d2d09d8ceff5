"""Managed services a stack declares: FSx for Lustre, NAT gateways, public IPs, VPC endpoints, EKS, KMS,
CloudWatch Logs, S3, SQS. Each pricer returns its lines, or a no-charge label."""

from __future__ import annotations

from collections.abc import Callable

from infra.catalog.services import lustre_price_key, service_price
from infra.core.shapes import dict_at, list_at
from infra.providers import tokens
from infra.tools.cost.lines import hourly, line, usage
from infra.tools.cost.model import Line
from infra.tools.cost.resources import Resources, whole
from infra.tools.preview_json import PolicyResource

Priced = list[Line] | str  # lines, or why the resource carries no charge of its own
NLB_CLASS = "service.k8s.aws/nlb"
PUBLIC_SUBNET_TAG = "kubernetes.io/role/elb"  # the subnets an internet-facing load balancer takes an address in


def lustre(r: PolicyResource, res: Resources) -> Priced:
    capacity = whole(r.props.get("storageCapacity"))
    deployment = str(r.props.get("deploymentType") or "SCRATCH_1")  # the API's default
    per_unit = whole(r.props.get("perUnitStorageThroughput"))
    label = f"{capacity} GiB {deployment}" + (f" {per_unit} MB/s/TiB" if per_unit else "")
    try:
        price = service_price(lustre_price_key(deployment, per_unit))
    except KeyError:
        price = None
    if capacity is None or price is None or price.usd is None:
        why = "no sourced price" if price is not None else "no price for this deployment type and throughput"
        return [line(r, res, "storage", basis="unknown", what=f"Lustre {label}: unknown ({why})")]
    return [hourly(r, res, "storage", price.key, capacity, f"Lustre {label}", per_month=True)]


def nat_gateway(r: PolicyResource, res: Resources) -> Priced:
    return [hourly(r, res, "network", "vpc.natGateway.hour", 1, "1 NAT gateway", usage=("vpc.natGateway.data",))]


def envoy_proxy(r: PolicyResource, res: Resources) -> Priced:
    """The load balancer the cloud makes for the gateway's proxies (not a Pulumi resource of its own). On EKS the
    AWS Load Balancer Controller's Network Load Balancer: its hour, and when internet-facing one public IPv4 address
    per zone (its public subnets). On GKE a passthrough Network Load Balancer: its forwarding rule's hour."""
    service = dict_at(
        dict_at(dict_at(dict_at(r.props.get("spec")).get("provider")).get("kubernetes")).get("envoyService")
    )
    annotations = dict_at(service.get("annotations"))
    if service.get("type", "LoadBalancer") != "LoadBalancer":
        return "no load balancer of its own (its Service is not of type LoadBalancer)"
    if service.get("loadBalancerClass") != NLB_CLASS:
        if any(s.type == tokens.GCP_CONTAINER_CLUSTER for s in res.all):
            return [
                hourly(
                    r,
                    res,
                    "network",
                    "gcp.loadBalancing.forwardingRule",
                    1,
                    "1 passthrough Network Load Balancer forwarding rule (the gateway's)",
                    usage=("gcp.loadBalancing.data",),
                )
            ]
        return "no AWS load balancer of its own (its Service is not of class service.k8s.aws/nlb)"
    lines = [
        hourly(
            r,
            res,
            "network",
            "elb.networkLoadBalancer.hour",
            1,
            "1 Network Load Balancer (the gateway's)",
            usage=("elb.networkLoadBalancer.nlcu",),
        ),
    ]
    if annotations.get("service.beta.kubernetes.io/aws-load-balancer-scheme") == "internet-facing":
        zones = sum(
            1
            for s in res.all
            if s.type == tokens.AWS_EC2_SUBNET and dict_at(s.props.get("tags")).get(PUBLIC_SUBNET_TAG) == "1"
        )
        lines.append(
            hourly(
                r,
                res,
                "network",
                "vpc.publicIpv4",
                max(zones, 1),
                f"{max(zones, 1)} public IPv4 address(es) of the load balancer",
            )
        )
    return lines


def elastic_ip(r: PolicyResource, res: Resources) -> Priced:
    return [hourly(r, res, "network", "vpc.publicIpv4", 1, "1 public IPv4 address")]


def vpc_endpoint(r: PolicyResource, res: Resources) -> Priced:
    kind = r.props.get("vpcEndpointType") or "Gateway"
    if kind == "Gateway":
        return "gateway endpoints (S3, DynamoDB) carry no charge"
    azs = max(1, len(list_at(r.props, "subnetIds")))
    name = str(r.props.get("serviceName", ""))
    service = name.split(".", 3)[-1] if name.startswith("com.amazonaws.") else name or r.name  # e.g. ecr.api
    return [
        hourly(
            r,
            res,
            "network",
            "vpc.interfaceEndpoint.hour",
            azs,
            f"interface endpoint {service} in {azs} AZ(s)",
            usage=("vpc.interfaceEndpoint.data",),
        )
    ]


def eks_cluster(r: PolicyResource, res: Resources) -> Priced:
    version = r.props.get("version")
    return [hourly(r, res, "control plane", "eks.cluster", 1, f"EKS control plane{f' {version}' if version else ''}")]


def kms_key(r: PolicyResource, res: Resources) -> Priced:
    return [hourly(r, res, "encryption", "kms.key", 1, "1 KMS key", per_month=True, usage=("kms.request",))]


def log_group(r: PolicyResource, res: Resources) -> Priced:
    days = whole(r.props.get("retentionInDays"))
    kept = f"kept {days} days" if days else "kept forever"
    return [
        usage(
            r,
            res,
            "logs",
            f"log group {r.props.get('name') or r.name} ({kept}): depends on log volume",
            "logs.ingestion",
            "logs.storage",
        )
    ]


def metric_alarm(r: PolicyResource, res: Resources) -> Priced:
    return [hourly(r, res, "logs", "cloudwatch.alarm", 1, "1 CloudWatch alarm", per_month=True)]


def bucket(r: PolicyResource, res: Resources) -> Priced:
    return [
        usage(
            r,
            res,
            "registry data",
            "S3 bucket: depends on what is stored (every object version counts) and on requests",
            "s3.standard.storage",
            "s3.put.request",
            "s3.get.request",
        )
    ]


def sqs_queue(r: PolicyResource, res: Resources) -> Priced:
    return [usage(r, res, "guard", "SQS queue: depends on messages", "sqs.request")]


PRICERS: dict[str, Callable[[PolicyResource, Resources], Priced]] = {
    tokens.AWS_FSX_LUSTRE_FILE_SYSTEM: lustre,
    tokens.AWS_EC2_NAT_GATEWAY: nat_gateway,
    tokens.AWS_EC2_EIP: elastic_ip,
    tokens.K8S_ENVOY_PROXY: envoy_proxy,
    tokens.AWS_EC2_VPC_ENDPOINT: vpc_endpoint,
    tokens.AWS_EKS_CLUSTER: eks_cluster,
    tokens.AWS_KMS_KEY: kms_key,
    tokens.AWS_CLOUDWATCH_LOG_GROUP: log_group,
    tokens.AWS_CLOUDWATCH_METRIC_ALARM: metric_alarm,
    tokens.AWS_S3_BUCKET: bucket,
    tokens.AWS_S3_BUCKET_V2: bucket,
    tokens.AWS_SQS_QUEUE: sqs_queue,
}
