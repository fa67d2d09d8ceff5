"""Serving components under the recording mocks: what each declares, with which inputs and options."""

from __future__ import annotations

import json

import pulumi
import pulumi_kubernetes as k8s
import pytest

from components.registry.aws.access import RegistryAccess
from components.serving.aws.eks_cluster import EksCluster, EksClusterArgs
from components.serving.aws.model_server import ModelServer, ModelServerArgs
from components.serving.aws.node_pool import ServingNodePool, ServingNodePoolArgs
from components.serving.aws.vpc import ServingVpc, ServingVpcArgs
from infra.core.tags import contract_tags, missing_contract_tags
from infra.serving import manifests
from infra.serving.aws import node_pools
from infra.serving.aws.config import ClusterSpec, G5PoolSpec, ModelSpec
from infra.serving.aws.zones import Zone
from tests.helpers import by_type, one, taggable
from tests.k8s_schemas import manifest_of, validate

TAGS = contract_tags("serving", "test")
BUCKET_ARN = "arn:aws:s3:::mlinfra-registry-test"
KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/k"


def assert_tagged(result):
    for step in result.resources():
        if taggable(step):
            assert missing_contract_tags("serving", step.inputs.get("tags")) == [], step.urn


def test_vpc_private_subnets_in_two_azs_with_nat_and_no_public_ips(record):
    zones = [Zone("us-east-1d", "use1-az4"), Zone("us-east-1a", "use1-az6")]
    result = record(lambda: ServingVpc("net", ServingVpcArgs("10.80.0.0/16", zones, TAGS, "us-east-1")))
    assert result.errors == []
    subnets = by_type(result, "aws:ec2/subnet:Subnet")
    private = [s for s in subnets if "internal-elb" in json.dumps(s.inputs["tags"])]
    # Named by slot (the slot's CIDR), placed by the account's name for the chosen zone.
    assert [(s.name, s.inputs["availabilityZone"], s.inputs["cidrBlock"]) for s in private] == [
        ("net-private-a", "us-east-1d", "10.80.0.0/19"),
        ("net-private-b", "us-east-1a", "10.80.32.0/19"),
    ]
    assert all(s.inputs["mapPublicIpOnLaunch"] is False for s in subnets)
    assert len(by_type(result, "aws:ec2/natGateway:NatGateway")) == 2
    private_routes = [
        r for r in by_type(result, "aws:ec2/routeTable:RouteTable") if "natGatewayId" in json.dumps(r.inputs)
    ]
    assert len(private_routes) == 2
    # Weights and image layers from S3 skip NAT: one gateway endpoint on every private route table.
    s3 = one(result, "aws:ec2/vpcEndpoint:VpcEndpoint")
    assert (s3.inputs["serviceName"], s3.inputs["vpcEndpointType"]) == ("com.amazonaws.us-east-1.s3", "Gateway")
    assert sorted(s3.property_dependencies["routeTableIds"]) == sorted(r.urn for r in private_routes)
    assert one(result, "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup").inputs.get("ingress") in (None, [])
    assert_tagged(result)


def cluster(spec: ClusterSpec):
    return lambda: EksCluster("eks", EksClusterArgs(spec, "mlinfra-test", ["subnet-a", "subnet-b"], "us-east-1", TAGS))


def test_managed_policy_arns_name_the_regions_partition(record):
    """No hard-coded `aws` partition: in GovCloud every AWS-managed policy ARN is arn:aws-us-gov:..."""
    spec = ClusterSpec.model_validate({"adminRoleArns": ["arn:aws-us-gov:iam::123456789012:role/platform"]})
    args = EksClusterArgs(spec, "mlinfra-test", ["subnet-a"], "us-gov-west-1", TAGS, partition="aws-us-gov")
    result = record(lambda: EksCluster("eks", args))
    assert result.errors == []
    arns = [a.inputs["policyArn"] for a in by_type(result, "aws:iam/rolePolicyAttachment:RolePolicyAttachment")]
    arns += [a.inputs["policyArn"] for a in by_type(result, "aws:eks/accessPolicyAssociation:AccessPolicyAssociation")]
    assert len(arns) >= 3 and all(arn.startswith("arn:aws-us-gov:") for arn in arns), arns


def test_cluster_is_encrypted_logged_private_and_uses_access_entries(record):
    spec = ClusterSpec.model_validate(
        {"adminRoleArns": ["arn:aws:iam::123456789012:role/platform"], "logRetentionDays": 30}
    )
    result = record(cluster(spec))
    assert result.errors == []
    eks = one(result, "aws:eks/cluster:Cluster").inputs
    key = one(result, "aws:kms/key:Key")
    assert eks["encryptionConfig"] == {"provider": {"keyArn": key.outputs["arn"]}, "resources": ["secrets"]}
    assert key.inputs["enableKeyRotation"] is True
    assert eks["vpcConfig"]["endpointPrivateAccess"] is True and eks["vpcConfig"]["endpointPublicAccess"] is False
    assert "publicAccessCidrs" not in eks["vpcConfig"]
    assert eks["accessConfig"]["authenticationMode"] == "API"
    assert set(eks["enabledClusterLogTypes"]) == {"api", "audit", "authenticator", "controllerManager", "scheduler"}
    logs = one(result, "aws:cloudwatch/logGroup:LogGroup")
    assert logs.inputs == {"name": "/aws/eks/mlinfra-test/cluster", "retentionInDays": 30, "tags": TAGS}
    assert logs.urn in one(result, "aws:eks/cluster:Cluster").dependencies
    assert (
        one(result, "aws:eks/accessEntry:AccessEntry").inputs["principalArn"]
        == "arn:aws:iam::123456789012:role/platform"
    )
    assert one(result, "aws:eks/accessPolicyAssociation:AccessPolicyAssociation").inputs["accessScope"] == {
        "type": "cluster"
    }
    addons = {a.inputs["addonName"] for a in by_type(result, "aws:eks/addon:Addon")}
    assert addons == {"vpc-cni", "kube-proxy", "eks-pod-identity-agent"}  # CoreDNS comes with the nodes
    assert_tagged(result)


@pytest.mark.parametrize(
    "endpoint, public, cidrs",
    [
        ({"access": "restricted", "publicAccessCidrs": ["203.0.113.0/24"]}, True, ["203.0.113.0/24"]),
        ({"access": "private"}, False, None),
    ],
)
def test_public_endpoint_only_as_configured(record, endpoint, public, cidrs):
    result = record(cluster(ClusterSpec.model_validate({"endpoint": endpoint})))
    vpc = one(result, "aws:eks/cluster:Cluster").inputs["vpcConfig"]
    assert (vpc["endpointPublicAccess"], vpc.get("publicAccessCidrs")) == (public, cidrs)


def test_node_pool_launch_template_and_group(record):
    plan = node_pools.accelerator_plans("g5", G5PoolSpec(capacity_type="spot"))[1]
    result = record(
        lambda: ServingNodePool("pool", ServingNodePoolArgs(plan, "mlinfra-test", "arn:role", ["s-a", "s-b"], TAGS))
    )
    assert result.errors == []
    template = one(result, "aws:ec2/launchTemplate:LaunchTemplate").inputs
    assert template["metadataOptions"]["httpTokens"] == "required"
    assert template["metadataOptions"]["httpPutResponseHopLimit"] == 1
    [disk] = template["blockDeviceMappings"]
    assert disk["ebs"]["encrypted"] == "true" and disk["ebs"]["volumeType"] == "gp3"
    assert {t["resourceType"] for t in template["tagSpecifications"]} == {"instance", "volume", "network-interface"}
    group = one(result, "aws:eks/nodeGroup:NodeGroup").inputs
    assert group["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    assert group["capacityType"] == "SPOT" and group["instanceTypes"] == ["g5.2xlarge"]  # one shape per group
    assert group["scalingConfig"] == {"minSize": 0, "maxSize": 4, "desiredSize": 0}
    tags = {t.inputs["tag"]["key"]: t.inputs["tag"] for t in result.steps if t.type == "aws:autoscaling/tag:Tag"}
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] == {
        "key": "k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu",
        "value": "1",
        "propagateAtLaunch": False,
    }
    assert set(tags) == set(plan.template_tags())
    assert group["labels"]["mlinfra.io/accelerator"] == "g5"
    assert "diskSize" not in group  # set on the launch template
    assert_tagged(result)


MODEL = ModelSpec.model_validate({"name": "llama", "version": "1.0", "accelerator": "inf2", "image": "neuron-vllm:1"})


def model_server():
    def program():
        provider = k8s.Provider("k8s", kubeconfig="{}")
        ModelServer(
            "model-llama",
            ModelServerArgs(
                model=MODEL,
                namespace="models",
                cluster_name="mlinfra-test",
                registry=RegistryAccess(BUCKET_ARN, KEY_ARN),
                registry_location=manifests.Registry("mlinfra-registry-test", "us-east-1"),
                tags=TAGS,
            ),
            opts=pulumi.ResourceOptions(providers={"kubernetes": provider}),
        )

    return program


def test_model_server_role_reads_only_its_prefix(record):
    result = record(model_server())
    assert [e.message for e in result.errors] == []
    policy = json.loads(one(result, "aws:iam/rolePolicy:RolePolicy").inputs["policy"])
    read = next(s for s in policy["Statement"] if s["Sid"] == "RegistryRead")
    assert read["Resource"] == [f"{BUCKET_ARN}/models/llama/1.0/neuron/*"]
    assert not any(
        a.startswith("s3:Put") or a.startswith("s3:Delete")
        for s in policy["Statement"]
        for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    )
    identity = one(result, "aws:eks/podIdentityAssociation:PodIdentityAssociation").inputs
    assert (identity["namespace"], identity["serviceAccount"]) == ("models", "llama")
    trust = json.loads(one(result, "aws:iam/role:Role").inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert_tagged(result)


def test_model_server_objects_are_declared_as_built_and_validate(record):
    result = record(model_server())
    declared = [s for s in result.resources() if s.type.startswith("kubernetes:") and s.custom]
    assert sorted(s.type for s in declared) == sorted(
        [
            "kubernetes:core/v1:ServiceAccount",
            "kubernetes:apps/v1:Deployment",
            "kubernetes:core/v1:Service",
            "kubernetes:policy/v1:PodDisruptionBudget",
            "kubernetes:keda.sh/v1alpha1:ScaledObject",
        ]
    )
    for step in declared:
        manifest = manifest_of(step)
        validate(manifest)
        expected = next(
            o
            for o in manifests.model_server_objects(
                MODEL, "models", manifests.Registry("mlinfra-registry-test", "us-east-1")
            )
            if o["kind"] == manifest["kind"]
        )
        assert manifest == expected
    deployment = one(result, "kubernetes:apps/v1:Deployment")
    identity = one(result, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
    assert identity.urn in deployment.dependencies


def test_offline_check_tells_custom_resources_from_misspelt_builtin_kinds(record):
    def program():
        provider = k8s.Provider("k8s", kubeconfig="{}")
        opts = pulumi.ResourceOptions(provider=provider)
        k8s.apiextensions.CustomResource(
            "scaler",
            api_version="keda.sh/v1alpha1",
            kind="ScaledObject",
            metadata={"name": "x"},
            spec={"triggers": []},
            opts=opts,
        )
        k8s.apiextensions.CustomResource(
            "typo", api_version="apps/v1", kind="Deploymnt", metadata={"name": "x"}, opts=opts
        )

    result = record(program)
    assert [e.message for e in result.errors] == [
        "kubernetes:apps/v1:Deploymnt: not a resource type of the installed provider"
    ]
    assert any(
        d.message.startswith("kubernetes:keda.sh/v1alpha1:ScaledObject: a Kubernetes custom resource")
        for d in result.diagnostics
        if d.severity == "info"
    )
