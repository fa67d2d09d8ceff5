"""The serving-demo stack through the offline preview: the real program, its config and the registry reference."""

from __future__ import annotations

import json

import pytest

from infra.catalog.aws.zones import eks_unsupported_zone_ids, offline_zones, zone_ids_offering
from infra.core.tags import missing_contract_tags
from infra.tools.offline.engine import preview
from tests.helpers import by_type, one, taggable
from tests.k8s_schemas import manifest_of, validate

MODELS = {
    "llama-3-8b-neuron": ("inf2", "models/llama-3-8b-neuron/2025-06-01/neuron/"),
    "mistral-7b": ("g5", "models/mistral-7b/2025-05-20/cuda/"),
}

CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/0f3c2a9e-5b7d-4e21-9c8a-1d2e3f4a5b6c"
API_KEYS = "arn:aws:secretsmanager:us-east-1:123456789012:secret:mlinfra/serving-demo/api-keys-AbCdEf"


@pytest.fixture(scope="module")
def demo():
    return preview("serving-demo")


def test_previews_without_errors(demo):
    assert [d.message for d in demo.errors] == []
    assert len(demo.resources()) >= 60


def test_cluster_and_its_network(demo):
    cluster = one(demo, "aws:eks/cluster:Cluster").inputs
    assert cluster["name"] == "mlinfra-serving-demo"
    assert cluster["vpcConfig"]["publicAccessCidrs"] == ["203.0.113.0/24"]
    assert len(cluster["vpcConfig"]["subnetIds"]) == 2
    private = [s for s in by_type(demo, "aws:ec2/subnet:Subnet") if "private" in s.name]
    assert len({s.inputs["availabilityZone"] for s in private}) == 2


def node_group_zones(result, region: str) -> dict[str, set[str]]:
    """Instance type of each node group -> zone IDs of its subnets (the offline account's names mapped back)."""
    ids = offline_zones(region)
    zone_of = {s.name: ids[s.inputs["availabilityZone"]] for s in by_type(result, "aws:ec2/subnet:Subnet")}
    found: dict[str, set[str]] = {}
    for group in by_type(result, "aws:eks/nodeGroup:NodeGroup"):
        (itype,) = group.inputs["instanceTypes"]
        found.setdefault(itype, set()).update(zone_of[i.rsplit("-", 1)[0]] for i in group.inputs["subnetIds"])
    return found


def test_zones_are_chosen_by_id_where_every_pool_is_offered_and_eks_places_clusters(demo):
    # The old choice, the region's first two names, gave us-east-1b (use1-az1), which offers no inf2.
    private = sorted((s.name, s.inputs["availabilityZone"]) for s in by_type(demo, "aws:ec2/subnet:Subnet"))
    assert [zone for name, zone in private if "private" in name] == ["us-east-1c", "us-east-1d"]
    for itype, zone_ids in node_group_zones(demo, "us-east-1").items():
        assert zone_ids and zone_ids <= set(zone_ids_offering(itype, "us-east-1")), itype
        assert not zone_ids & set(eks_unsupported_zone_ids("us-east-1"))


def test_a_pool_offered_in_fewer_zones_than_the_cluster_spans_gets_only_those():
    secret = "arn:aws:secretsmanager:eu-west-2:123456789012:secret:ecr-pullthroughcache/docker-hub-AbCdEf"
    result = preview(
        "serving-demo",
        [
            ("aws:region", "eu-west-2"),
            ("mlinfra:serving.cluster.availabilityZones", "3"),
            ("mlinfra:serving.imageMirror.dockerHubCredentialArn", secret),
            ("mlinfra:serving.gateway.certificateArn", CERTIFICATE.replace("us-east-1", "eu-west-2")),
            ("mlinfra:serving.gateway.apiKeysSecretArn", API_KEYS.replace("us-east-1", "eu-west-2")),
        ],
    )
    assert [d.message for d in result.errors] == []
    assert len(one(result, "aws:eks/cluster:Cluster").inputs["vpcConfig"]["subnetIds"]) == 3
    zones = node_group_zones(result, "eu-west-2")
    assert zones["inf2.xlarge"] == zones["inf2.8xlarge"] == {"euw2-az2"}
    assert zones["g5.xlarge"] == zones["g5.2xlarge"] == {"euw2-az2", "euw2-az3"}
    assert zones["m6i.large"] == {"euw2-az1", "euw2-az2", "euw2-az3"}


def test_both_accelerator_pools_with_their_taints(demo):
    groups = {g.parent.rsplit("::", 1)[1]: g for g in by_type(demo, "aws:eks/nodeGroup:NodeGroup")}
    assert set(groups) == {
        "pool-system-large",
        "pool-system-xlarge",
        "pool-inf2-xlarge",
        "pool-inf2-8xlarge",
        "pool-g5-xlarge",
        "pool-g5-2xlarge",
        "pool-g5-xlarge-fallback",  # on demand behind each Spot group, empty until Spot cannot launch
        "pool-g5-2xlarge-fallback",
    }  # no on-demand baseline (onDemandBase 0): mistral-7b is at zero at night, and so is the g5 pool
    assert groups["pool-g5-xlarge"].inputs["scalingConfig"] == {"minSize": 0, "maxSize": 6, "desiredSize": 0}
    for size in ("xlarge", "2xlarge"):
        fallback = groups.pop(f"pool-g5-{size}-fallback")
        assert fallback.inputs["capacityType"] == "ON_DEMAND" and fallback.inputs["instanceTypes"] == [f"g5.{size}"]
        assert fallback.inputs["scalingConfig"] == {"minSize": 0, "maxSize": 6, "desiredSize": 0}
        assert fallback.inputs["labels"]["mlinfra.io/on-demand-fallback"] == "true"
    for name, group in groups.items():
        family = name.split("-")[1]
        assert group.inputs["instanceTypes"] == [f"{family if family != 'system' else 'm6i'}.{name.split('-')[2]}"]
        taints = {
            "inf2": [{"key": "aws.amazon.com/neuron", "value": "true", "effect": "NO_SCHEDULE"}],
            "g5": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}],
            "system": [],
        }
        assert group.inputs.get("taints", []) == taints[family]
        assert group.inputs["capacityType"] == ("SPOT" if family == "g5" else "ON_DEMAND")
        scaling = group.inputs["scalingConfig"]
        assert 0 <= scaling["minSize"] <= scaling["maxSize"] <= 100


def test_node_pools_go_before_the_cluster_on_destroy(demo):
    cluster = one(demo, "aws:eks/cluster:Cluster")
    for group in by_type(demo, "aws:eks/nodeGroup:NodeGroup"):
        # Pulumi deletes dependents first: each group depends on the cluster through its clusterName.
        assert cluster.urn in group.property_dependencies["clusterName"], group.urn


def test_device_plugins_keda_and_metrics_are_pinned_releases(demo):
    releases = {r.inputs["name"]: r.inputs for r in by_type(demo, "kubernetes:helm.sh/v3:Release")}
    assert set(releases) == {
        "nvidia-device-plugin",
        "neuron",
        "keda",
        "prometheus",
        "cluster-autoscaler",
        "aws-load-balancer-controller",
        "envoy-gateway",
        "ai-gateway-crds",
        "ai-gateway",
        "external-secrets",
        *MODELS,  # each model's InferencePool and endpoint picker
    }
    for name, release in releases.items():
        assert release["version"].removeprefix("v")[0].isdigit(), name
    assert releases["neuron"]["values"]["scheduler"]["enabled"] is True
    assert releases["nvidia-device-plugin"]["repositoryOpts"] == {"repo": "https://nvidia.github.io/k8s-device-plugin"}


def test_one_server_per_model_and_an_autoscaler_whose_metric_is_not_cpu(demo):
    deployments = {
        d.inputs["metadata"]["name"]: d.inputs
        for d in by_type(demo, "kubernetes:apps/v1:Deployment")
        if d.inputs["metadata"]["namespace"] == "models"
    }
    assert set(deployments) == set(MODELS)
    for name, (accelerator, _) in MODELS.items():
        resource = {"inf2": "aws.amazon.com/neuron", "g5": "nvidia.com/gpu"}[accelerator]
        container = deployments[name]["spec"]["template"]["spec"]["containers"][0]
        assert container["resources"]["limits"][resource] == "1"
    scalers = {
        s.inputs["metadata"]["name"]: s.inputs for s in by_type(demo, "kubernetes:keda.sh/v1alpha1:ScaledObject")
    }
    assert set(scalers) == set(MODELS)
    for scaler in scalers.values():
        triggers = scaler["spec"]["triggers"]
        assert {t["type"] for t in triggers} <= {"prometheus", "cron"}  # cron: a schedule's minimums
        queries = " ".join(t["metadata"]["query"] for t in triggers if t["type"] == "prometheus")
        assert "vllm:num_requests_waiting" in queries
        assert "cpu" not in json.dumps(triggers).lower()
    assert (
        scalers["mistral-7b"]["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"][
            "stabilizationWindowSeconds"
        ]
        == 600
    )


def test_pulumi_waits_for_a_cold_start(demo):
    """A model server's first replica needs a node, a multi-GB image and its weights: longer than Pulumi's
    default 10-minute wait for a Deployment."""
    waits = {
        d.inputs["metadata"]["name"]: d.custom_timeouts
        for d in by_type(demo, "kubernetes:apps/v1:Deployment")
        if d.inputs["metadata"]["namespace"] == "models"
    }
    assert waits == {
        "llama-3-8b-neuron": {"create": "2400s", "update": "2400s"},
        "mistral-7b": {"create": "1800s", "update": "1800s"},
    }


def test_every_kubernetes_object_validates_against_its_schema(demo):
    objects = [
        s
        for s in demo.resources()
        if s.custom and s.type.startswith("kubernetes:") and s.type != "kubernetes:helm.sh/v3:Release"
    ]
    # The namespace, the converter's account, five objects per server; the front door's: the servers'
    # NetworkPolicy, Envoy Gateway's InferencePool reader (2), the rate limiter's Redis (2), GatewayClass,
    # EnvoyProxy, Gateway, rate limits, the body limit, the API keys' SecretStore and ExternalSecret, the API-key
    # policy and the route by model.
    assert len(objects) == 2 + 5 * len(MODELS) + 14
    for step in objects:
        validate(manifest_of(step))


def test_each_model_role_reads_only_its_own_prefix(demo, registry_preview):
    bucket_arn = registry_preview.outputs["bucketArn"]
    roles = {r.urn: r for r in by_type(demo, "aws:iam/role:Role")}
    identities = {
        i.inputs["serviceAccount"]: i for i in by_type(demo, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
    }
    policies = by_type(demo, "aws:iam/rolePolicy:RolePolicy")
    for name, (_, prefix) in MODELS.items():
        role = next(r for r in roles.values() if r.name == f"model-{name}-role")
        assert identities[name].inputs["roleArn"] == role.outputs["arn"]
        [policy] = [json.loads(p.inputs["policy"]) for p in policies if p.parent == role.urn]
        statements = {s["Sid"]: s for s in policy["Statement"]}
        assert statements["RegistryRead"]["Resource"] == [f"{bucket_arn}/{prefix}*"]
        assert statements["RegistryRead"]["Action"] == ["s3:GetObject", "s3:GetObjectVersion", "s3:GetObjectTagging"]
        assert statements["RegistryList"]["Condition"] == {"StringLike": {"s3:prefix": [f"{prefix}*"]}}
        assert statements["RegistryKey"]["Action"] == ["kms:Decrypt"]
        assert statements["RegistryKey"]["Resource"] == registry_preview.outputs["kmsKeyArn"]


def test_the_conversion_jobs_identity_reads_checkpoints_writes_models_and_may_down_scope_itself(demo, registry_preview):
    bucket_arn = registry_preview.outputs["bucketArn"]
    arn = "arn:aws:iam::123456789012:role/mlinfra-serving-demo-model-converter"
    role = next(r for r in by_type(demo, "aws:iam/role:Role") if r.name == "model-converter-role")
    assert role.inputs["name"] == "mlinfra-serving-demo-model-converter" and role.outputs["arn"] == arn
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert trust[0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert trust[0]["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    assert trust[1]["Principal"] == {"AWS": "arn:aws:iam::123456789012:root"}
    assert trust[1]["Condition"] == {"ArnEquals": {"aws:PrincipalArn": arn}}
    policies = {
        p.name: json.loads(p.inputs["policy"])
        for p in by_type(demo, "aws:iam/rolePolicy:RolePolicy")
        if p.parent == role.urn
    }
    grants = {
        name.split("-registry-")[1].split("-")[0]: {s["Sid"]: s for s in p["Statement"]}
        for name, p in policies.items()
        if "-registry-" in name
    }
    reads = sorted(
        resource
        for name, p in policies.items()
        if "-registry-read-" in name
        for s in p["Statement"]
        if s["Sid"] == "RegistryRead"
        for resource in s["Resource"]
    )  # the conversion Jobs' checkpoints and calibration data, the evaluation Jobs' data (one grant each)
    assert reads == [
        f"{bucket_arn}/checkpoints/*",
        f"{bucket_arn}/datasets/calibration/*",
        f"{bucket_arn}/datasets/evals/*",
    ]
    assert grants["write"]["RegistryWrite"]["Resource"] == [f"{bucket_arn}/models/*"]
    assert policies["model-converter-role-self-assume"]["Statement"][0]["Resource"] == arn
    # Jobs never move aliases nor claim versions: `promote` writes those with its caller's credentials.
    assert policies["model-converter-role-deny-promotion-objects"]["Statement"] == [
        {
            "Sid": "DenyPromotionObjects",
            "Effect": "Deny",
            "Action": ["s3:PutObject"],
            "Resource": [  # what promote writes with its caller's credentials, never a Job
                f"{bucket_arn}/models/*/aliases/*",
                f"{bucket_arn}/models/*/*/_PROMOTION",
                f"{bucket_arn}/models/*/manifest.json",
                f"{bucket_arn}/models/*/_FAILED",
            ],
        }
    ]
    [identity] = [
        i.inputs
        for i in by_type(demo, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
        if i.inputs["serviceAccount"] == "model-converter"
    ]
    assert identity["namespace"] == "models" and identity["roleArn"] == arn and identity["disableSessionTags"] is True
    [account] = [s for s in by_type(demo, "kubernetes:core/v1:ServiceAccount") if s.name == "model-converter-sa"]
    assert (
        account.inputs["metadata"]["name"] == "model-converter" and account.inputs["metadata"]["namespace"] == "models"
    )
    assert demo.outputs["converterRoleArn"] == arn


def test_every_taggable_resource_has_the_contract_tags(demo):
    tagged = [s for s in demo.resources() if taggable(s)]
    assert len(tagged) > 30
    for step in tagged:
        assert missing_contract_tags("serving", step.inputs.get("tags")) == [], step.urn
        assert step.inputs["tags"]["mlinfra:stack"] == "serving-demo"


def test_nodes_use_imdsv2_and_encrypted_disks(demo):
    for template in by_type(demo, "aws:ec2/launchTemplate:LaunchTemplate"):
        assert template.inputs["metadataOptions"]["httpTokens"] == "required"
        assert all(m["ebs"]["encrypted"] == "true" for m in template.inputs["blockDeviceMappings"])


def test_custom_resources_are_noted_not_failed(demo):
    notes = [d.message for d in demo.diagnostics if d.severity == "info"]
    assert any(n.startswith("kubernetes:keda.sh/v1alpha1:ScaledObject: a Kubernetes custom resource") for n in notes)


def test_outputs(demo):
    assert demo.outputs["clusterName"] == "mlinfra-serving-demo"
    assert demo.outputs["models"]["mistral-7b"]["prefix"] == "models/mistral-7b/2025-05-20/cuda/"


def test_pod_roles_trust_only_their_own_cluster_namespace_and_service_account(demo):
    """A role handed out through Pod Identity names, in its trust, the session tags of the one association
    meant to use it; the converter's association disables session tags (packed size), so its role cannot."""
    identities = by_type(demo, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
    roles = {r.outputs["arn"]: r for r in by_type(demo, "aws:iam/role:Role")}
    scoped = 0
    for identity in identities:
        trust = json.loads(roles[identity.inputs["roleArn"]].inputs["assumeRolePolicy"])["Statement"][0]
        if identity.inputs.get("disableSessionTags"):
            continue
        assert trust["Condition"]["StringEquals"] == {
            "aws:RequestTag/eks-cluster-name": identity.inputs["clusterName"],
            "aws:RequestTag/kubernetes-namespace": identity.inputs["namespace"],
            "aws:RequestTag/kubernetes-service-account": identity.inputs["serviceAccount"],
        }
        scoped += 1
    # Every server, the cluster autoscaler, the load balancer controller and External Secrets.
    assert scoped == len(identities) - 1 == len(MODELS) + 3


def test_images_come_through_the_accounts_pull_through_cache(demo):
    """No anonymous Docker Hub pulls through the NAT gateways: every container image is the account's ECR."""
    rules = {
        r.inputs["ecrRepositoryPrefix"]: r.inputs
        for r in by_type(demo, "aws:ecr/pullThroughCacheRule:PullThroughCacheRule")
    }
    assert rules["ecr-public"]["upstreamRegistryUrl"] == "public.ecr.aws"
    assert rules["docker-hub"]["upstreamRegistryUrl"] == "registry-1.docker.io"
    assert rules["docker-hub"]["credentialArn"].split(":secret:")[1].startswith("ecr-pullthroughcache/")
    for deployment in by_type(demo, "kubernetes:apps/v1:Deployment"):
        spec = deployment.inputs["spec"]["template"]["spec"]
        for container in spec.get("initContainers", []) + spec["containers"]:
            assert container["image"].startswith("123456789012.dkr.ecr.us-east-1.amazonaws.com/"), container["image"]
    policy = next(
        json.loads(p.inputs["policy"])
        for p in by_type(demo, "aws:iam/rolePolicy:RolePolicy")
        if p.name == "image-mirror-node-pull-through"
    )
    assert policy["Statement"][0]["Action"] == ["ecr:BatchImportUpstreamImage", "ecr:CreateRepository"]


def test_an_account_without_the_pools_zones_stops_before_any_resource(monkeypatch):
    import infra.catalog.aws.zones as catalog_zones

    # An account that has only use1-az1 and EKS's disallowed use1-az3: no zone offers inf2 there.
    monkeypatch.setattr(
        catalog_zones, "offline_zones", lambda region: {"us-east-1b": "use1-az1", "us-east-1e": "use1-az3"}
    )
    result = preview("serving-demo")
    assert [d.message for d in result.errors] == [
        "invalid mlinfra config:\n"
        "mlinfra:serving.nodePools.inf2.instanceTypes: the zones of us-east-1 that offer every type of the pool "
        "(use1-az2, use1-az4, use1-az5, use1-az6) are not available to this account, which has use1-az1; list "
        "sizes offered there"
    ]
    assert [r.type for r in result.resources() if r.type != "pulumi:pulumi:Stack"] == []


def test_pinned_zone_ids_keep_a_deployed_clusters_zones_in_slot_order():
    pins = [
        ("mlinfra:serving.cluster.availabilityZoneIds[0]", "use1-az6"),
        ("mlinfra:serving.cluster.availabilityZoneIds[1]", "use1-az2"),
    ]
    result = preview("serving-demo", pins)
    assert [d.message for d in result.errors] == []
    subnets = {s.name: s.inputs["availabilityZone"] for s in by_type(result, "aws:ec2/subnet:Subnet")}
    # Slot a (10.80.0.0/19) in use1-az6, which the offline account calls us-east-1a; slot b in use1-az2.
    assert subnets["serving-net-private-a"] == "us-east-1a" and subnets["serving-net-private-b"] == "us-east-1c"
    assert all(zones == {"use1-az6", "use1-az2"} for zones in node_group_zones(result, "us-east-1").values())
