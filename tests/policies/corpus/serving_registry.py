"""Crafted misconfigurations of the serving stacks (serving-demo on EKS, serving-gcp-demo on GKE), the registry and
its GCS mirror."""

from __future__ import annotations

import ipaddress

from infra.providers import tokens as t
from tests.policies.corpus.mutations import (
    DELETE,
    Entry,
    both,
    copy_as,
    drop,
    in_document,
    option,
    set_,
    with_statement,
)

EKS, GKE, REGISTRY, MIRROR = "serving-demo", "serving-gcp-demo", "registry", "registry-gcp-mirror"
DEPLOYMENT, SCALER, POOL = t.K8S_DEPLOYMENT, t.K8S_KEDA_SCALED_OBJECT, t.AWS_EKS_NODE_GROUP
CLUSTER, ROLE, POLICY = t.AWS_EKS_CLUSTER, t.AWS_IAM_ROLE, t.AWS_IAM_ROLE_POLICY
SERVER = (DEPLOYMENT, "model-mistral-7b-deployment")
POD = "spec.template.spec"
MISTRAL_READ = (POLICY, "cuda-cd2b95")
BUCKET = "mlinfra-registry-123456789012-us-east-1"
PROXY, PROXY_SERVICE = t.K8S_ENVOY_PROXY, "spec.provider.kubernetes.envoyService"
NLB = "service.beta.kubernetes.io/aws-load-balancer-"
CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/0f3c2a9e-5b7d-4e21-9c8a-1d2e3f4a5b6c"


def _internet_less(*holes: str) -> list[str]:
    blocks = [ipaddress.IPv4Network("0.0.0.0/0")]
    for hole in map(ipaddress.IPv4Network, holes):
        blocks = [p for b in blocks for p in (b.address_exclude(hole) if hole.subnet_of(b) else [b])]
    return sorted(str(b) for b in blocks)


INTERNET_LESS_PRIVATE = _internet_less("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")


def allow(action: object, resource: object = "*", sid: str = "Corpus") -> dict:
    return {"Sid": sid, "Effect": "Allow", "Action": action, "Resource": resource}


def _privileged(pod: dict) -> dict:
    pod["containers"][0]["securityContext"] = {"privileged": True}
    return pod


ENTRIES = [
    # EKS
    Entry(
        "eks-endpoint-internet",
        EKS,
        "eks-api-endpoint-restricted",
        set_(CLUSTER, "serving-eks-cluster", "vpcConfig.publicAccessCidrs", ["0.0.0.0/0"]),
        "the API on the internet",
    ),
    Entry(
        "eks-secrets-plain",
        EKS,
        "eks-secrets-encrypted",
        set_(CLUSTER, "serving-eks-cluster", "encryptionConfig", DELETE),
        "Secrets without envelope encryption",
    ),
    Entry(
        "gpu-pool-untainted",
        EKS,
        "accelerator-node-pools-tainted",
        set_(POOL, "pool-g5-xlarge-nodes", "taints", DELETE),
        "any pod lands on GPU nodes",
    ),
    Entry(
        "eks-endpoint-split-internet",
        EKS,
        "eks-api-endpoint-restricted",
        set_(CLUSTER, "serving-eks-cluster", "vpcConfig.publicAccessCidrs", ["0.0.0.0/1", "128.0.0.0/1"]),
        "the API on the internet, in two halves",
    ),
    Entry(
        "training-type-serving",
        EKS,
        "serving-pools-use-serving-types",
        set_(POOL, "pool-g5-xlarge-nodes", "instanceTypes", ["p4d.24xlarge"]),
        "training hardware in serving",
    ),
    Entry(
        "pool-imdsv1",
        EKS,
        "instance-metadata-requires-imdsv2",
        set_(t.AWS_EC2_LAUNCH_TEMPLATE, "pool-g5-xlarge-lt", "metadataOptions.httpTokens", "optional"),
        "IMDSv1",
    ),
    Entry(
        "pool-root-unencrypted",
        EKS,
        "block-devices-encrypted",
        set_(t.AWS_EC2_LAUNCH_TEMPLATE, "pool-g5-xlarge-lt", "blockDeviceMappings.0.ebs.encrypted", "false"),
        "an unencrypted node volume",
    ),
    Entry(
        "eks-logs-forever",
        EKS,
        "log-groups-have-retention",
        set_(t.AWS_CLOUDWATCH_LOG_GROUP, "serving-eks-logs", "retentionInDays", DELETE),
        "control plane logs forever",
    ),
    Entry(
        "private-subnet-public-ips",
        EKS,
        "nodes-without-public-ip",
        set_(t.AWS_EC2_SUBNET, "serving-net-private-a", "mapPublicIpOnLaunch", True),
        "nodes on the internet",
    ),
    Entry(
        "scaler-unbounded",
        EKS,
        "autoscalers-have-replica-bounds",
        set_(SCALER, "model-mistral-7b-scaler", "spec.maxReplicaCount", DELETE),
        "no replica ceiling",
    ),
    Entry(
        "scaler-on-cpu",
        EKS,
        "model-servers-scale-on-inference-signals",
        set_(
            SCALER,
            "model-mistral-7b-scaler",
            "spec.triggers",
            [{"type": "cpu", "metricType": "Utilization", "metadata": {"value": "70"}}],
        ),
        "GPU servers scaled on CPU",
    ),
    Entry(
        "server-host-network",
        EKS,
        "pods-without-host-access",
        set_(*SERVER, f"{POD}.hostNetwork", True),
        "a model server on the node's network",
    ),
    Entry(
        "server-host-pid",
        EKS,
        "pods-without-host-access",
        set_(*SERVER, f"{POD}.hostPID", True),
        "a model server sees the node's processes",
    ),
    Entry(
        "server-privileged",
        EKS,
        "pods-without-host-access",
        set_(*SERVER, POD, _privileged),
        "a privileged model server",
    ),
    Entry(
        "server-docker-socket",
        EKS,
        "pods-without-host-access",
        set_(*SERVER, f"{POD}.volumes", [{"name": "docker", "hostPath": {"path": "/var/run/docker.sock"}}]),
        "the container runtime's socket in a pod",
    ),
    Entry(
        "server-writes-models",
        EKS,
        "serving-registry-access-read-only",
        set_(*MISTRAL_READ, "policy", with_statement(allow("s3:PutObject", f"arn:aws:s3:::{BUCKET}/models/*"))),
        "a server overwrites what it serves",
    ),
    Entry(
        "autoscaler-passrole",
        EKS,
        "iam-grants-without-privilege-escalation",
        set_(POLICY, "serving-addons-autoscaler-policy", "policy", with_statement(allow("iam:PassRole"))),
        "the autoscaler hands out any role",
    ),
    Entry(
        "autoscaler-unconditioned-scale",
        EKS,
        "iam-grants-without-privilege-escalation",
        set_(
            POLICY,
            "serving-addons-autoscaler-policy",
            "policy",
            in_document(lambda d: d["Statement"][1].pop("Condition")),
        ),
        "it scales every group of the account",
    ),
    Entry(
        "server-trust-anyone",
        EKS,
        "trust-policies-name-their-principals",
        set_(
            ROLE,
            "model-mistral-7b-role",
            "assumeRolePolicy",
            in_document(lambda d: d["Statement"][0].update(Principal="*")),
        ),
        "anyone assumes the server's role",
    ),
    Entry(
        "eks-node-s3-full",
        EKS,
        "roles-without-broad-managed-policies",
        set_(
            t.AWS_IAM_ROLE_POLICY_ATTACHMENT,
            "serving-eks-node-role-amazonec2containerregistryreadonly",
            "policyArn",
            "arn:aws:iam::aws:policy/AmazonS3FullAccess",
        ),
        "nodes write every bucket",
    ),
    # GKE
    Entry(
        "gke-public-nodes",
        GKE,
        "gke-nodes-private",
        set_(t.GCP_CONTAINER_CLUSTER, "serving-gke-cluster", "privateClusterConfig.enablePrivateNodes", False),
        "nodes with public IPs",
    ),
    Entry(
        "gke-no-workload-identity",
        GKE,
        "gke-workload-identity-enabled",
        set_(t.GCP_CONTAINER_CLUSTER, "serving-gke-cluster", "workloadIdentityConfig", DELETE),
        "pods use the node's account",
    ),
    Entry(
        "gke-unshielded",
        GKE,
        "gke-shielded-nodes",
        set_(t.GCP_CONTAINER_CLUSTER, "serving-gke-cluster", "enableShieldedNodes", False),
        "unshielded nodes",
    ),
    Entry(
        "gke-pool-public",
        GKE,
        "gke-node-pools-without-public-ip",
        set_(t.GCP_CONTAINER_NODE_POOL, "pool-l4-pool", "networkConfig.enablePrivateNodes", False),
        "a pool with public IPs",
    ),
    Entry(
        "gke-server-host-ipc",
        GKE,
        "pods-without-host-access",
        set_(DEPLOYMENT, "model-llama-3-8b-l4-deployment", f"{POD}.hostIPC", True),
        "shared IPC with the node",
    ),
    Entry(
        "gke-nodes-owner",
        GKE,
        "gcp-project-grants-without-broad-roles",
        set_(t.GCP_PROJECTS_IAM_MEMBER, "serving-gke-nodes-monitoring-viewer", "role", "roles/owner"),
        "GKE nodes own the project",
    ),
    # registry
    Entry(
        "registry-unversioned",
        REGISTRY,
        "registry-bucket-versioned",
        set_(t.AWS_S3_BUCKET_VERSIONING, "registry-versioning", "versioningConfiguration.status", "Suspended"),
        "overwrites lose models",
    ),
    Entry(
        "registry-acls-allowed",
        REGISTRY,
        "registry-bucket-public-access-blocked",
        set_(t.AWS_S3_BUCKET_PUBLIC_ACCESS_BLOCK, "registry-public-access-block", "blockPublicAcls", False),
        "public ACLs possible",
    ),
    Entry(
        "registry-sse-s3",
        REGISTRY,
        "registry-bucket-encrypted-with-kms",
        set_(
            t.AWS_S3_BUCKET_SERVER_SIDE_ENCRYPTION_CONFIGURATION,
            "registry-encryption",
            "rules.0.applyServerSideEncryptionByDefault",
            {"sseAlgorithm": "AES256"},
        ),
        "no KMS key",
    ),
    Entry(
        "registry-plain-http",
        REGISTRY,
        "registry-bucket-tls-only",
        drop(t.AWS_S3_BUCKET_POLICY, "registry-tls-only"),
        "requests without TLS",
    ),
    Entry(
        "registry-unprotected",
        REGISTRY,
        "registry-bucket-and-key-protected",
        option(t.AWS_S3_BUCKET, "registry-bucket", protect=False),
        "one destroy deletes the registry",
    ),
    Entry(
        "registry-no-events",
        REGISTRY,
        "registry-bucket-sends-events-to-eventbridge",
        set_(t.AWS_S3_BUCKET_NOTIFICATION, "registry-events", "eventbridge", False),
        "guards never hear of markers",
    ),
    Entry(
        "registry-world-readable",
        REGISTRY,
        "resource-policies-grant-no-one-outside",
        set_(
            t.AWS_S3_BUCKET_POLICY,
            "registry-tls-only",
            "policy",
            with_statement(
                {
                    "Sid": "Public",
                    "Effect": "Allow",
                    "Principal": "*",
                    "Action": "s3:GetObject",
                    "Resource": f"arn:aws:s3:::{BUCKET}/*",
                }
            ),
        ),
        "anyone reads the registry",
    ),
    # the GCS mirror
    Entry(
        "mirror-unversioned",
        MIRROR,
        "gcs-buckets-versioned",
        set_(t.GCP_STORAGE_BUCKET, "mirror-bucket", "versioning.enabled", False),
        "overwrites lose models",
    ),
    Entry(
        "mirror-google-key",
        MIRROR,
        "gcs-buckets-encrypted-with-cmek",
        set_(t.GCP_STORAGE_BUCKET, "mirror-bucket", "encryption", DELETE),
        "no customer-managed key",
    ),
    Entry(
        "mirror-public-possible",
        MIRROR,
        "gcs-buckets-not-public",
        set_(t.GCP_STORAGE_BUCKET, "mirror-bucket", "publicAccessPrevention", "inherited"),
        "may be made public",
    ),
    Entry(
        "mirror-public-reader",
        MIRROR,
        "gcs-buckets-not-granted-to-the-public",
        set_(t.GCP_STORAGE_BUCKET_IAM_MEMBER, "mirror-reader-0", "member", "allAuthenticatedUsers"),
        "any Google account reads the models",
    ),
    Entry(
        "mirror-deletes",
        MIRROR,
        "transfer-jobs-never-delete",
        set_(
            t.GCP_STORAGE_TRANSFER_JOB,
            "mirror-transfer",
            "transferSpec.transferOptions.deleteObjectsUniqueInSink",
            True,
        ),
        "the mirror deletes what S3 lacks",
    ),
    Entry(
        "mirror-copies-checkpoints",
        MIRROR,
        "transfer-jobs-copy-models-only",
        set_(t.GCP_STORAGE_TRANSFER_JOB, "mirror-transfer", "transferSpec.awsS3DataSource.path", ""),
        "checkpoints and datasets leave AWS",
    ),
    Entry(
        "mirror-transfer-admin",
        MIRROR,
        "gcs-buckets-not-granted-to-the-public",
        set_(t.GCP_STORAGE_BUCKET_IAM_MEMBER, "mirror-transfer-writer", "member", "allUsers"),
        "anyone writes",
    ),
    # The front door (EKS)
    Entry(
        "gateway-tls-removed",
        EKS,
        "gateway-listeners-use-tls",
        set_(PROXY, "front-door-envoyproxy", f"{PROXY_SERVICE}.annotations", {NLB + "scheme": "internet-facing"}),
        "the load balancer forwards plain HTTP from the internet",
    ),
    Entry(
        "gateway-tls-on-another-port",
        EKS,
        "gateway-listeners-use-tls",
        set_(
            PROXY,
            "front-door-envoyproxy",
            f"{PROXY_SERVICE}.annotations",
            {NLB + "scheme": "internet-facing", NLB + "ssl-cert": CERTIFICATE, NLB + "ssl-ports": "8443"},
        ),
        "TLS on a port the listener does not use",
    ),
    Entry(
        "gateway-auth-removed",
        EKS,
        "unauthenticated-gateways-restrict-sources",
        drop(t.K8S_ENVOY_SECURITY_POLICY, "front-door-securitypolicy"),
        "no API keys, open to any address",
    ),
    Entry(
        "gateway-auth-removed-internet-in-halves",
        EKS,
        "unauthenticated-gateways-restrict-sources",
        both(
            drop(t.K8S_ENVOY_SECURITY_POLICY, "front-door-securitypolicy"),
            set_(
                PROXY,
                "front-door-envoyproxy",
                f"{PROXY_SERVICE}.loadBalancerSourceRanges",
                ["0.0.0.0/1", "128.0.0.0/1"],
            ),
        ),
        "no API keys, source ranges that cover the internet",
    ),
    Entry(
        "gateway-route-policy-without-auth",
        EKS,
        "unauthenticated-gateways-restrict-sources",
        both(
            copy_as(
                t.K8S_ENVOY_SECURITY_POLICY,
                "front-door-securitypolicy",
                "front-door-route-override",
                "spec",
                {
                    "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "front-door"}],
                    "cors": {"allowOrigins": ["*"]},
                },
            ),
            set_(
                t.K8S_ENVOY_SECURITY_POLICY,
                "front-door-route-override",
                "metadata",
                {"name": "front-door-cors", "namespace": "models"},  # beside the route it targets
            ),
        ),
        "a route's own SecurityPolicy (CORS only) silently drops the Gateway's API keys on that route",
    ),
    Entry(
        "model-server-load-balancer",
        EKS,
        "model-servers-not-exposed-directly",
        set_(t.K8S_SERVICE, "model-mistral-7b-service", "spec.type", "LoadBalancer"),
        "a model server on its own load balancer, past the gateway",
    ),
    Entry(
        "model-server-node-port",
        EKS,
        "model-servers-not-exposed-directly",
        set_(t.K8S_SERVICE, "model-llama-3-8b-neuron-service", "spec.type", "NodePort"),
        "a model server on every node's port",
    ),
    Entry(
        "eks-api-internet-less-private",
        EKS,
        "eks-api-endpoint-restricted",
        set_(CLUSTER, "serving-eks-cluster", "vpcConfig.publicAccessCidrs", INTERNET_LESS_PRIVATE),
        "the API open to the internet spelt as everything but 10/8, 172.16/12 and 192.168/16",
    ),
    # Supply chain
    Entry(
        "chart-version-range",
        EKS,
        "charts-and-images-pinned",
        set_(t.K8S_HELM_RELEASE, "serving-addons-keda", "version", "^2.20"),
        "a chart version range: each up may install another release",
    ),
    Entry(
        "chart-version-unset",
        EKS,
        "charts-and-images-pinned",
        set_(t.K8S_HELM_RELEASE, "front-door-external-secrets", "version", DELETE),
        "no chart version: the newest, whatever it is",
    ),
    Entry(
        "chart-over-plain-http",
        EKS,
        "charts-and-images-pinned",
        set_(
            t.K8S_HELM_RELEASE,
            "serving-addons-prometheus",
            "repositoryOpts.repo",
            "http://prometheus-community.github.io/helm-charts",
        ),
        "a chart fetched over plain HTTP",
    ),
    Entry(
        "image-latest",
        EKS,
        "charts-and-images-pinned",
        set_(t.K8S_DEPLOYMENT, "front-door-redis-deployment", "spec.template.spec.containers.0.image", "redis:latest"),
        "the rate limiter's Redis from :latest",
    ),
    Entry(
        "image-without-tag",
        GKE,
        "charts-and-images-pinned",
        set_(
            t.K8S_DEPLOYMENT,
            "front-door-redis-deployment",
            "spec.template.spec.containers.0.image",
            "docker.io/library/redis",
        ),
        "an image without a tag is :latest",
    ),
    # The model servers' isolation (both clouds)
    Entry(
        "model-servers-policy-removed",
        EKS,
        "model-servers-admit-the-gateway-only",
        drop(t.K8S_NETWORK_POLICY, "front-door-model-servers-policy"),
        "no NetworkPolicy: any pod in the cluster calls the model servers",
    ),
    Entry(
        "model-servers-policy-any-namespace",
        GKE,
        "model-servers-admit-the-gateway-only",
        set_(
            t.K8S_NETWORK_POLICY,
            "front-door-model-servers-policy",
            "spec.ingress",
            [{"from": [{"namespaceSelector": {}}]}],
        ),
        "the policy admits every pod of every namespace",
    ),
    Entry(
        "model-servers-policy-without-peers",
        EKS,
        "model-servers-admit-the-gateway-only",
        set_(t.K8S_NETWORK_POLICY, "front-door-model-servers-policy", "spec.ingress", [{"ports": [{"port": 8000}]}]),
        "an ingress rule with ports but no `from`: every source on the server's port",
    ),
    Entry(
        "eks-network-policy-agent-off",
        EKS,
        "model-servers-admit-the-gateway-only",
        set_(t.AWS_EKS_ADDON, "serving-eks-vpc-cni", "configurationValues", DELETE),
        "the VPC CNI without its network policy agent: the policy is declared, nothing enforces it",
    ),
    Entry(
        "gke-without-dataplane-v2",
        GKE,
        "model-servers-admit-the-gateway-only",
        set_(t.GCP_CONTAINER_CLUSTER, "serving-gke-cluster", "datapathProvider", DELETE),
        "a GKE cluster on the legacy dataplane without Calico: nothing enforces the policy",
    ),
    # Scale to zero (mistral-7b is at zero at night)
    Entry(
        "zero-without-the-pickers-hold",
        EKS,
        "models-at-zero-are-held-and-woken",
        set_(t.K8S_HELM_RELEASE, "front-door-pool-mistral-7b", "values.inferenceExtension.pluginsConfigFile", DELETE),
        "the picker on its default config: a request at zero fails at once and nothing counts it",
    ),
    Entry(
        "zero-that-never-wakes",
        EKS,
        "models-at-zero-are-held-and-woken",
        set_(SCALER, "model-mistral-7b-scaler", "spec.triggers.2", DELETE),
        "the held-requests trigger removed: the engines' metrics vanish with the last pod, nothing wakes it",
    ),
    Entry(
        "zero-cooldown-shorter-than-start-up",
        EKS,
        "models-at-zero-are-held-and-woken",
        set_(SCALER, "model-mistral-7b-scaler", "spec.cooldownPeriod", 300),
        "KEDA's default cooldown against a 13.5-minute start from zero: the pool flaps",
    ),
    # The front door (GKE)
    Entry(
        "gke-gateway-tls-removed",
        GKE,
        "gateway-listeners-use-tls",
        set_(t.K8S_GATEWAY, "front-door-gateway", "spec.listeners.0.protocol", "HTTP"),
        "the listener made plain HTTP behind a passthrough load balancer: nothing ends TLS",
    ),
    Entry(
        "gke-gateway-auth-removed",
        GKE,
        "unauthenticated-gateways-restrict-sources",
        drop(t.K8S_ENVOY_SECURITY_POLICY, "front-door-securitypolicy"),
        "no API keys, GKE's load balancer open to any address",
    ),
]
