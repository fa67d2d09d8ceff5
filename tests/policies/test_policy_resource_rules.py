"""Resource rules: the compliant fixture passes; each broken field gives its exact message."""

import json

import pytest

from policies.model import UNKNOWN, Resource
from policies.rules.everywhere import (
    block_devices_encrypted,
    ingress_not_open_to_the_internet,
    instance_metadata_requires_imdsv2,
    log_groups_have_retention,
)
from policies.rules.registry import registry_access_without_wildcards, registry_bucket_and_key_protected
from policies.rules.serving import (
    accelerator_node_pools_tainted,
    eks_api_endpoint_restricted,
    eks_secrets_encrypted,
    node_pools_have_limits,
    serving_pools_use_serving_types,
)
from policies.rules.training import (
    efa_on_every_network_card,
    lustre_associations_without_automatic_import,
    lustre_capacity_allowed_step,
    lustre_data_repository_paths_in_s3,
    lustre_final_backup_choice_explicit,
    lustre_linked_through_data_repository_associations,
    lustre_throughput_allowed_value,
    multi_interface_instances_without_public_ip,
    placement_groups_use_cluster_strategy,
    training_launch_templates_tag_what_they_launch,
    training_nodes_use_training_types,
)
from tests.policies.policy_fixtures import (
    IN,
    changed,
    one,
    read_grant,
    registry_resources,
    training_resources,
    write_grant,
)

TRAINING = training_resources()
REGISTRY = registry_resources()


def check(module, resources, name):
    resource = one(resources, name)
    assert module.RULE.applies_to(resource.type)
    return module.RULE.check(resource)


# (module, resource name, path, value or DELETE, expected messages); the fixture itself is compliant.
DELETE = object()
CASES = [
    (
        efa_on_every_network_card,
        "template",
        "networkInterfaces",
        [
            {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
            {"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "efa-only"},
        ],
        [
            "p4d.24xlarge has EFA on network card 0 only, 1 of its 4 EFA cards (100 of 400 Gbps); add interfaceType "
            "'efa-only' at networkCardIndex 1-3 (deviceIndex 0), as infra.training.aws.efa.efa_layout lays out"
        ],
    ),
    (
        efa_on_every_network_card,
        "template",
        "networkInterfaces.1.interfaceType",
        "interface",
        [
            "p4d.24xlarge has EFA on network cards 1-3, 3 of its 4 EFA cards (300 of 400 Gbps); add interfaceType "
            "'efa-only' at networkCardIndex 0 (deviceIndex 1), as infra.training.aws.efa.efa_layout lays out"
        ],
    ),
    (
        efa_on_every_network_card,
        "template",
        "instanceType",
        "g5.xlarge",
        [
            "instanceType: g5.xlarge does not support EFA (Elastic Fabric Adapter), which multi-node training needs on "
            "every network card; choose an EFA-capable instance type, e.g. g5.8xlarge, g5.12xlarge, g5.16xlarge, "
            "g5.24xlarge, g5.48xlarge"
        ],
    ),
    (
        multi_interface_instances_without_public_ip,
        "template",
        "networkInterfaces.0.associatePublicIpAddress",
        "true",
        [
            "networkInterfaces[0] sets associatePublicIpAddress with 5 interfaces; remove it (multi-interface "
            "instances "
            "cannot have a public IP; use a NAT gateway or VPC endpoints)"
        ],
    ),
    (
        instance_metadata_requires_imdsv2,
        "template",
        "metadataOptions.httpTokens",
        "optional",
        ["metadataOptions.httpTokens is 'optional', which accepts IMDSv1; set it to 'required'"],
    ),
    (
        instance_metadata_requires_imdsv2,
        "template",
        "metadataOptions.httpTokens",
        DELETE,
        ["metadataOptions.httpTokens is not set, so instances accept IMDSv1; set it to 'required'"],
    ),
    (
        instance_metadata_requires_imdsv2,
        "template",
        "metadataOptions",
        DELETE,
        ["metadataOptions is not set, so instances accept IMDSv1; set metadataOptions.httpTokens to 'required'"],
    ),
    (
        block_devices_encrypted,
        "template",
        "blockDeviceMappings.0.ebs.encrypted",
        "false",
        ["blockDeviceMappings[0] (/dev/sda1) ebs.encrypted is not true; set ebs.encrypted: true"],
    ),
    (
        training_launch_templates_tag_what_they_launch,
        "template",
        "tagSpecifications.1.resourceType",
        "spot-instances-request",
        [
            "tagSpecifications has no 'volume' entry, so launched volumes carry no run tags; add one with resourceType "
            "'volume' and the run's contract tags"
        ],
    ),
    (
        training_launch_templates_tag_what_they_launch,
        "template",
        "tagSpecifications.0.tags",
        {"mlinfra:role": "training"},
        [
            "tagSpecifications 'instance' lacks mlinfra:stack, mlinfra:run-id, mlinfra:expires-at; give it the run's "
            "contract tags"
        ],
    ),
    (
        training_nodes_use_training_types,
        "template",
        "instanceType",
        "inf2.xlarge",
        [
            "instance type inf2.xlarge is a serving type; training takes one of: p4d.24xlarge, p4de.24xlarge, "
            "p5.48xlarge, "
            "p5e.48xlarge, p5en.48xlarge, trn1.32xlarge, trn1n.32xlarge, trn2.48xlarge"
        ],
    ),
    (
        training_nodes_use_training_types,
        "fleet",
        "launchTemplateConfigs.0.overrides.0.instanceType",
        "g5.48xlarge",
        [
            "instance type g5.48xlarge is a serving type; training takes one of: p4d.24xlarge, p4de.24xlarge, "
            "p5.48xlarge, p5e.48xlarge, p5en.48xlarge, trn1.32xlarge, trn1n.32xlarge, trn2.48xlarge"
        ],
    ),
    (
        placement_groups_use_cluster_strategy,
        "placement",
        "strategy",
        "spread",
        ["strategy is 'spread'; training nodes need strategy 'cluster' (one spine for the EFA fabric)"],
    ),
    (
        lustre_capacity_allowed_step,
        "fs",
        "storageCapacity",
        3000,
        [
            "storageCapacity: 3000 GiB is not a PERSISTENT_2 storage capacity; allowed: 1200 GiB or a "
            "multiple of 2400 GiB "
            "(nearest: 2400, 4800)"
        ],
    ),
    (
        lustre_capacity_allowed_step,
        "fs",
        "storageCapacity",
        DELETE,
        ["storageCapacity is not set; set an allowed step of the deployment type"],
    ),
    (
        lustre_throughput_allowed_value,
        "fs",
        "perUnitStorageThroughput",
        300,
        ["perUnitStorageThroughput: 300 is not a PERSISTENT_2 throughput; allowed: 125, 250, 500, 1000 MB/s/TiB"],
    ),
    (
        lustre_throughput_allowed_value,
        "fs",
        "perUnitStorageThroughput",
        DELETE,
        ["perUnitStorageThroughput: PERSISTENT_2 needs a per-unit throughput; allowed: 125, 250, 500, 1000 MB/s/TiB"],
    ),
    (
        lustre_throughput_allowed_value,
        "fs",
        "deploymentType",
        "SCRATCH_2",
        [
            "perUnitStorageThroughput: SCRATCH_2 has a fixed baseline of 200 MB/s/TiB; leave the per-unit throughput "
            "unset (it applies to PERSISTENT_1, PERSISTENT_2 only)"
        ],
    ),
    (
        lustre_final_backup_choice_explicit,
        "fs",
        "skipFinalBackup",
        DELETE,
        [
            "skipFinalBackup is not set; choose explicitly: true for run scratch space whose data lives in "
            "the registry, "
            "false to keep a final backup (it outlives the stack and is billed)"
        ],
    ),
    (
        lustre_linked_through_data_repository_associations,
        "fs",
        "importPath",
        "s3://mlinfra-registry/datasets/",
        [
            "importPath links S3 at creation; remove it and link the registry through "
            "aws:fsx/dataRepositoryAssociation "
            "resources (up to 8, with import and export policies)"
        ],
    ),
    (
        lustre_data_repository_paths_in_s3,
        "datasets",
        "dataRepositoryPath",
        "mlinfra-registry/datasets/",
        ["dataRepositoryPath 'mlinfra-registry/datasets/' is not an S3 path; use s3://<registry bucket>/<prefix>/"],
    ),
    (
        lustre_data_repository_paths_in_s3,
        "datasets",
        "fileSystemPath",
        "datasets",
        ["fileSystemPath 'datasets' is not absolute; use a path such as /datasets"],
    ),
    (
        lustre_associations_without_automatic_import,
        "datasets",
        "s3",
        {"autoImportPolicy": {"events": ["NEW", "CHANGED", "DELETED"]}},
        [
            "s3.autoImportPolicy imports NEW, CHANGED, DELETED events automatically, through S3 event notifications "
            "on the shared registry bucket that a concurrent run's overlap and the registry's BucketNotification "
            "removes; remove it and import once with batchImportMetaDataOnCreate: true"
        ],
    ),
    (
        log_groups_have_retention,
        "logs",
        "retentionInDays",
        DELETE,
        ["retentionInDays is not set, so events are kept (and billed) forever; set retentionInDays, e.g. 30"],
    ),
    (
        registry_access_without_wildcards,
        "node-role-write",
        "policy",
        json.dumps({"Statement": [{"Sid": "All", "Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}),
        [
            "policy statement All allows 's3:*'; list the actions it needs (RegistryAccess.grant_read/grant_write name "
            "each action and prefix)",
            "policy statement All allows s3:* on resource '*'; name the registry bucket, its prefixes and its key "
            "(RegistryAccess.grant_read/grant_write name each action and prefix)",
        ],
    ),
    (
        registry_access_without_wildcards,
        "node-role-write",
        "policy",
        json.dumps({"Statement": [{"Sid": "Admin", "Effect": "Allow", "Action": "*", "Resource": "arn:aws:s3:::b"}]}),
        [
            "policy statement Admin allows '*'; list the actions it needs (RegistryAccess.grant_read/grant_write name "
            "each action and prefix)"
        ],
    ),
]


@pytest.mark.parametrize(
    "module, name, path, value, expected", CASES, ids=[f"{c[0].NAME}:{c[2] or 'fixture'}" for c in CASES]
)
def test_broken_field_gives_its_message(module, name, path, value, expected):
    assert check(module, TRAINING, name) == []
    broken = changed(TRAINING, name, path, delete=True) if value is DELETE else changed(TRAINING, name, path, value)
    assert check(module, broken, name) == expected


def test_registry_bucket_and_key_protected():
    assert check(registry_bucket_and_key_protected, REGISTRY, "registry-bucket") == []
    assert check(
        registry_bucket_and_key_protected, changed(REGISTRY, "registry-bucket", "", protect=False), "registry-bucket"
    ) == [
        "registry bucket 'registry-bucket' is not protected; declare it with protect=True and retain_on_delete=True "
        "so neither pulumi destroy nor dropping it from the program deletes it"
    ]
    assert check(
        registry_bucket_and_key_protected, changed(REGISTRY, "registry-key", "", protect=False), "registry-key"
    )[0].startswith("registry KMS key 'registry-key' is not protected;")


def test_bucket_policy_allowing_everyone_is_a_wildcard():
    policy = {
        "Statement": [
            {
                "Sid": "Public",
                "Effect": "Allow",
                "Principal": {"AWS": "*"},
                "Action": ["s3:GetObject"],
                "Resource": "arn:aws:s3:::mlinfra-registry/*",
            }
        ]
    }
    broken = changed(REGISTRY, "registry-tls-only", "policy", json.dumps(policy))
    assert check(registry_access_without_wildcards, broken, "registry-tls-only") == [
        "policy statement Public allows principal '*' (anyone); allow named roles only"
    ]
    assert check(registry_access_without_wildcards, REGISTRY, "registry-tls-only") == []  # Deny s3:* is fine


def test_grants_of_the_registry_pass_the_wildcard_rule():
    for document in (write_grant(), read_grant()):
        r = Resource("aws:iam/rolePolicy:RolePolicy", {"policy": json.dumps(document)}, name="grant")
        assert registry_access_without_wildcards.check(r) == []


@pytest.mark.parametrize(
    "props, expected",
    [
        (
            {"ipProtocol": "tcp", "fromPort": 22, "toPort": 22, "cidrIpv4": "0.0.0.0/0"},
            ["cidrIpv4 0.0.0.0/0 admits the internet (tcp 22); allow the VPC CIDR or peer security groups instead"],
        ),
        (
            {"ipProtocol": "-1", "cidrIpv6": "::/0"},
            ["cidrIpv6 ::/0 admits the internet (all traffic); allow the VPC CIDR or peer security groups instead"],
        ),
        ({"ipProtocol": "tcp", "fromPort": 443, "toPort": 443, "cidrIpv4": "10.64.0.0/16"}, []),
    ],
)
def test_ingress_rule_resources(props, expected):
    assert ingress_not_open_to_the_internet.check(Resource(IN, props, name="rule")) == expected


def test_inline_security_group_ingress():
    group = Resource(
        "aws:ec2/securityGroup:SecurityGroup",
        {"ingress": [{"protocol": "tcp", "fromPort": 1018, "toPort": 1023, "cidrBlocks": ["10.0.0.0/8", "0.0.0.0/0"]}]},
    )
    assert ingress_not_open_to_the_internet.check(group) == [
        "ingress[0] admits 0.0.0.0/0 (tcp 1018-1023); allow the VPC CIDR or peer security groups instead"
    ]


def test_volumes_and_instances_are_encrypted():
    volume = "aws:ebs/volume:Volume"
    assert block_devices_encrypted.check(Resource(volume, {"encrypted": True, "size": 100})) == []
    assert block_devices_encrypted.check(Resource(volume, {"size": 100})) == [
        "encrypted is not true; set encrypted: true (kmsKeyId for a customer managed key)"
    ]
    instance = Resource(
        "aws:ec2/instance:Instance",
        {"rootBlockDevice": {"encrypted": False}, "ebsBlockDevices": [{"deviceName": "/dev/sdf"}]},
    )
    assert block_devices_encrypted.check(instance) == [
        "rootBlockDevice.encrypted is not true; set it to true",
        "ebsBlockDevices[0] (/dev/sdf) encrypted is not true; set it to true",
    ]


def test_unknown_values_are_not_judged_during_a_preview():
    assert block_devices_encrypted.check(Resource("aws:ebs/volume:Volume", {"encrypted": UNKNOWN})) == []
    assert (
        instance_metadata_requires_imdsv2.check(
            Resource("aws:ec2/launchTemplate:LaunchTemplate", {"metadataOptions": UNKNOWN})
        )
        == []
    )


NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
SERVING_TAGS = {"mlinfra:role": "serving", "mlinfra:stack": "serving-demo"}


def node_group(types, taints=None):
    return Resource(
        NODE_GROUP,
        {
            "tags": SERVING_TAGS,
            "instanceTypes": types,
            "taints": taints or [],
            "scalingConfig": {"minSize": 1, "maxSize": 4, "desiredSize": 1},
        },
        name="pool",
    )


def test_serving_pools_use_serving_types():
    assert serving_pools_use_serving_types.check(node_group(["inf2.xlarge", "g5.2xlarge"])) == []
    assert serving_pools_use_serving_types.check(node_group(["m6i.large"])) == []  # a system pool
    assert serving_pools_use_serving_types.check(node_group(["p4d.24xlarge"])) == [
        "instance type p4d.24xlarge is a training type; serving takes one of: inf2.xlarge, inf2.8xlarge, "
        "inf2.24xlarge, inf2.48xlarge, g5.xlarge, g5.2xlarge, g5.4xlarge, g5.8xlarge, g5.12xlarge, g5.16xlarge, "
        "g5.24xlarge, g5.48xlarge, g4dn.xlarge, g4dn.2xlarge, g4dn.4xlarge, g4dn.8xlarge, g4dn.12xlarge, "
        "g4dn.16xlarge, g6.xlarge, g6.2xlarge, g6.4xlarge, g6.8xlarge, g6.12xlarge, g6.16xlarge, g6.24xlarge, "
        "g6.48xlarge, g6e.xlarge, g6e.2xlarge, g6e.4xlarge, g6e.8xlarge, g6e.12xlarge, g6e.16xlarge, "
        "g6e.24xlarge, g6e.48xlarge"
    ]


def test_accelerator_node_pools_tainted():
    gpu = [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    assert accelerator_node_pools_tainted.check(node_group(["g5.xlarge"], gpu)) == []
    assert accelerator_node_pools_tainted.check(node_group(["m6i.large"])) == []
    assert accelerator_node_pools_tainted.check(node_group(["inf2.xlarge"], gpu)) == [
        "accelerator pool has no aws.amazon.com/neuron taint with effect NO_SCHEDULE; add it so only pods requesting "
        "aws.amazon.com/neuron are scheduled here"
    ]


KARPENTER = "kubernetes:karpenter.sh/v1:NodePool"


def test_karpenter_node_pools_have_limits_and_serving_types():
    spec = {
        "template": {
            "spec": {
                "requirements": [
                    {
                        "key": "node.kubernetes.io/instance-type",
                        "operator": "In",
                        "values": ["g5.xlarge", "p5.48xlarge"],
                    }
                ],
                "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
            }
        },
        "limits": {"nvidia.com/gpu": 16},
    }
    pool = Resource(KARPENTER, {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "spec": spec}, name="gpu")
    assert node_pools_have_limits.check(pool) == []
    assert accelerator_node_pools_tainted.check(pool) == []
    assert serving_pools_use_serving_types.check(pool)[0].startswith("instance type p5.48xlarge is a training type;")
    del spec["limits"]
    assert node_pools_have_limits.check(pool) == [
        "spec.limits is not set, so the pool may launch nodes without bound; set limits such as cpu, "
        "nvidia.com/gpu or aws.amazon.com/neuron"
    ]


CLUSTER = "aws:eks/cluster:Cluster"
GOOD_CLUSTER = {
    "vpcConfig": {"endpointPublicAccess": True, "endpointPrivateAccess": True, "publicAccessCidrs": ["203.0.113.0/24"]},
    "encryptionConfig": {"resources": ["secrets"], "provider": {"keyArn": "arn:aws:kms:k"}},
}


@pytest.mark.parametrize(
    "vpc, expected",
    [
        (GOOD_CLUSTER["vpcConfig"], []),
        ({"endpointPublicAccess": False, "endpointPrivateAccess": True}, []),
        (
            {"endpointPrivateAccess": True},
            [
                "vpcConfig.endpointPublicAccess is on (AWS's default) with no publicAccessCidrs, so the "
                "Kubernetes API is open "
                "to the internet; set endpointPublicAccess false and endpointPrivateAccess true, or list the "
                "networks that may "
                "reach it in publicAccessCidrs"
            ],
        ),
        (
            {"endpointPublicAccess": True, "publicAccessCidrs": ["0.0.0.0/0"]},
            ["vpcConfig.publicAccessCidrs includes 0.0.0.0/0; list only the networks that administer the cluster"],
        ),
    ],
)
def test_eks_api_endpoint_restricted(vpc, expected):
    assert eks_api_endpoint_restricted.check(Resource(CLUSTER, {**GOOD_CLUSTER, "vpcConfig": vpc})) == expected


def test_eks_secrets_encrypted():
    assert eks_secrets_encrypted.check(Resource(CLUSTER, GOOD_CLUSTER)) == []
    assert eks_secrets_encrypted.check(Resource(CLUSTER, {"vpcConfig": {}})) == [
        "encryptionConfig is not set, so Kubernetes secrets are not envelope-encrypted; set encryptionConfig with "
        "resources ['secrets'] and a KMS key as provider.keyArn"
    ]
    assert eks_secrets_encrypted.check(Resource(CLUSTER, {"encryptionConfig": {"resources": []}})) == [
        "encryptionConfig.resources does not include 'secrets'; set it to ['secrets']"
    ]


def test_an_association_that_exports_or_imports_nothing_automatically_passes():
    for s3 in ({"autoExportPolicy": {"events": ["NEW", "CHANGED"]}}, {"autoImportPolicy": {"events": []}}):
        assert (
            check(lustre_associations_without_automatic_import, changed(TRAINING, "datasets", "s3", s3), "datasets")
            == []
        )
