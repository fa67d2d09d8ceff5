"""Stack rules: the compliant stacks pass; each broken field or link gives its exact message."""

import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from policies.model import Finding, Resource
from policies.rules.cost import instance_types_have_catalog_price, stack_hourly_cost_under_ceiling
from policies.rules.registry import (
    registry_bucket_encrypted_with_kms,
    registry_bucket_public_access_blocked,
    registry_bucket_tls_only,
    registry_bucket_versioned,
)
from policies.rules.serving import serving_registry_access_read_only
from policies.rules.training import (
    efa_nodes_in_one_subnet,
    efa_security_group_self_referencing,
    lustre_in_same_az_as_nodes,
    lustre_security_group_allows_lustre_ports,
    placement_group_matches_capacity_mode,
    training_expiry_within_max_lifetime,
    training_registry_writes_own_run_only,
    training_resources_carry_run_tags,
    training_resources_not_protected,
)
from tests.policies.policy_fixtures import (
    FSX,
    LT,
    SERVING,
    SG,
    SUBNET,
    changed,
    one,
    read_grant,
    registry_resources,
    res,
    serving_tags,
    stack_of,
    training_resources,
    urn,
    without,
    write_grant,
)

TRAINING = training_resources()
REGISTRY = registry_resources()
T = "training-demo"


def run(module, resources, config=None):
    rule = module.RULE
    return rule.check(stack_of(resources), {**rule.defaults(), **(config or {})})


ALL_STACK_RULES = [
    efa_nodes_in_one_subnet,
    efa_security_group_self_referencing,
    instance_types_have_catalog_price,
    lustre_in_same_az_as_nodes,
    lustre_security_group_allows_lustre_ports,
    placement_group_matches_capacity_mode,
    registry_bucket_encrypted_with_kms,
    registry_bucket_public_access_blocked,
    registry_bucket_tls_only,
    registry_bucket_versioned,
    serving_registry_access_read_only,
    stack_hourly_cost_under_ceiling,
    training_expiry_within_max_lifetime,
    training_resources_carry_run_tags,
    training_resources_not_protected,
]


@pytest.mark.parametrize("module", ALL_STACK_RULES, ids=lambda m: m.NAME)
def test_compliant_stacks_pass(module):
    assert run(module, TRAINING) == []
    assert run(module, REGISTRY) == []


# --- fabric --------------------------------------------------------------------------------------


def test_efa_security_group_needs_self_ingress_and_egress():
    broken = without(TRAINING, "efa-in")
    assert run(efa_security_group_self_referencing, broken) == [
        Finding(
            urn(T, SG, "nodes"),
            (
                "EFA security group 'nodes' has no ingress rule for all protocols from itself; add one with "
                "protocol -1 "
                "whose peer is the group itself (0.0.0.0/0 does not satisfy EFA)"
            ),
        )
    ]
    # an all-traffic egress to 0.0.0.0/0 ('nodes-out') does not stand in for the self egress
    assert [
        f.message.split(";")[0] for f in run(efa_security_group_self_referencing, without(TRAINING, "efa-out"))
    ] == ["EFA security group 'nodes' has no egress rule for all protocols to itself"]


def test_efa_self_rule_must_cover_all_protocols():
    broken = changed(TRAINING, "efa-in", "ipProtocol", "tcp")
    assert len(run(efa_security_group_self_referencing, broken)) == 1


def test_efa_nodes_in_one_subnet_and_az():
    broken = changed(TRAINING, "fleet", "launchTemplateConfigs.0.overrides.0.availabilityZone", "us-east-1b")
    assert run(efa_nodes_in_one_subnet, broken) == [
        Finding(
            "",
            (
                "EFA nodes span 2 availability zones (us-east-1a, us-east-1b); put every node in one subnet of one AZ "
                "(the EFA fabric does not cross AZs)"
            ),
        )
    ]


def test_on_demand_nodes_need_a_cluster_placement_group():
    template = one(TRAINING, "template")
    unplaced = without(TRAINING, "template") + [
        replace(
            template,
            props={**template.props, "placement": {"availabilityZone": "us-east-1a"}},
            property_dependencies={k: v for k, v in template.property_dependencies.items() if k != "placement"},
        )
    ]
    assert run(placement_group_matches_capacity_mode, unplaced) == [
        Finding(
            urn(T, LT, "template"),
            (
                "'template' launches on-demand EFA nodes without a placement group; set placement.groupName to a "
                "PlacementGroup with strategy 'cluster'"
            ),
        )
    ]
    spread = changed(TRAINING, "placement", "strategy", "spread")
    assert run(placement_group_matches_capacity_mode, spread) == [
        Finding(
            urn(T, LT, "template"),
            (
                "'template' uses placement group 'placement' with strategy 'spread'; on-demand EFA nodes need "
                "strategy 'cluster'"
            ),
        )
    ]


def test_capacity_blocks_take_no_placement_group():
    block = changed(TRAINING, "template", "instanceMarketOptions", {"marketType": "capacity-block"})
    assert run(placement_group_matches_capacity_mode, block) == [
        Finding(
            urn(T, LT, "template"),
            (
                "'template' launches into a Capacity Block but also names a placement group; remove "
                "placement.groupName/groupId (Capacity Blocks place the instances themselves)"
            ),
        ),
        Finding(
            urn(T, "aws:ec2/placementGroup:PlacementGroup", "placement"),
            (
                "placement group 'placement' in a Capacity Block stack; remove it (Capacity Blocks bring their own "
                "placement, and an unused group only fails teardown)"
            ),
        ),
    ]


# --- Lustre --------------------------------------------------------------------------------------


def test_lustre_security_group_needs_988_and_1018_1023():
    broken = without(without(TRAINING, "lustre-in-lustre-1018"), "lustre-in-nodes-1018")
    assert run(lustre_security_group_allows_lustre_ports, broken) == [
        Finding(
            urn(T, SG, "lustre"),
            (
                "security group 'lustre' of Lustre 'fs' does not admit TCP 1018-1023; add ingress rules for "
                "TCP 988 and "
                "1018-1023 from the group itself"
            ),
        )
    ]
    narrow = changed(TRAINING, "lustre-in-lustre-1018", "toPort", 1020)
    narrow = changed(narrow, "lustre-in-nodes-1018", "toPort", 1020)
    assert "does not admit TCP 1021-1023;" in run(lustre_security_group_allows_lustre_ports, narrow)[0].message


def test_lustre_without_security_group():
    fs = one(TRAINING, "fs")
    bare = without(TRAINING, "fs") + [
        replace(
            fs,
            props={k: v for k, v in fs.props.items() if k != "securityGroupIds"},
            property_dependencies={"subnetIds": fs.property_dependencies["subnetIds"]},
        )
    ]
    assert run(lustre_security_group_allows_lustre_ports, bare) == [
        Finding(
            urn(T, FSX, "fs"),
            (
                "Lustre 'fs' has no security group; set securityGroupIds to a group that admits TCP 988 and "
                "1018-1023 from "
                "itself and the nodes"
            ),
        )
    ]


def test_lustre_in_the_nodes_az():
    other = Resource(SUBNET, {"availabilityZone": "us-east-1b"}, urn=urn(T, SUBNET, "other"), name="other")
    fs = one(TRAINING, "fs")
    moved = without(TRAINING, "fs") + [
        other,
        replace(fs, property_dependencies={**fs.property_dependencies, "subnetIds": (other.urn,)}),
    ]
    assert run(lustre_in_same_az_as_nodes, moved) == [
        Finding(
            urn(T, FSX, "fs"),
            (
                "Lustre 'fs' is in us-east-1b (subnet 'other') but the nodes are in us-east-1a; put the file system's "
                "subnet in the nodes' AZ"
            ),
        )
    ]


# --- teardown ------------------------------------------------------------------------------------


def test_protected_training_resource():
    broken = changed(TRAINING, "fs", "", protect=True)
    assert run(training_resources_not_protected, broken) == [
        Finding(
            urn(T, FSX, "fs"),
            (
                "'fs' is protected, but training stacks are destroyed after each run; drop protect (what must outlive "
                "the run belongs in the registry stack)"
            ),
        )
    ]
    assert run(training_resources_not_protected, REGISTRY) == []  # the registry is meant to be protected


def test_taggable_training_resources_carry_run_tags():
    broken = changed(TRAINING, "logs", "tags", {"mlinfra:role": "training", "mlinfra:stack": T})
    assert run(training_resources_carry_run_tags, broken) == [
        Finding(
            urn(T, "aws:cloudwatch/logGroup:LogGroup", "logs"),
            (
                "'logs' lacks tags mlinfra:run-id, mlinfra:expires-at; tag it with "
                "infra.core.tags.contract_tags('training', "
                "stack, run_id, expires_at)"
            ),
        )
    ]
    untagged = changed(TRAINING, "placement", "tags", delete=True)
    assert run(training_resources_carry_run_tags, untagged)[0].message.startswith(
        "'placement' lacks tags mlinfra:role, mlinfra:stack, mlinfra:run-id, mlinfra:expires-at;"
    )


NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "value, expected",
    [
        ("2026-01-02T00:00:00Z", None),
        (
            "2026-01-02",
            "mlinfra:expires-at '2026-01-02' is not ISO-8601 UTC (YYYY-MM-DDTHH:MM:SSZ); set lifecycle.expiresAt",
        ),
        (
            "2025-12-31T00:00:00Z",
            "mlinfra:expires-at 2025-12-31T00:00:00Z has passed; a new run needs a new expiry "
            "(lifecycle.expiresAt or ttlHours)",
        ),
        (
            "2026-02-01T00:00:00Z",
            "mlinfra:expires-at 2026-02-01T00:00:00Z is 744 hours away, beyond the maximum "
            "lifetime of 336 hours; shorten lifecycle.ttlHours, or checkpoint and start a new run",
        ),
    ],
)
def test_training_expiry_within_max_lifetime(value, expected):
    assert training_expiry_within_max_lifetime.expiry_problem(value, NOW, 336) == expected


def test_expiry_rule_reports_each_bad_value_once_and_reads_its_config():
    tags = {
        "mlinfra:role": "training",
        "mlinfra:stack": T,
        "mlinfra:run-id": "r",
        "mlinfra:expires-at": "2026-01-03T00:00:00Z",
    }
    stack = stack_of(changed(TRAINING, "private", "tags", tags))
    findings = training_expiry_within_max_lifetime.check(stack, {"maxLifetimeHours": 24}, now=NOW)
    assert [f.message for f in findings if "2026-01-03" in f.message] == [
        "mlinfra:expires-at 2026-01-03T00:00:00Z is 48 hours away, beyond the maximum lifetime of 24 hours; shorten "
        "lifecycle.ttlHours, or checkpoint and start a new run"
    ]


# --- registry ------------------------------------------------------------------------------------

B = "registry"


def test_registry_bucket_versioned():
    assert run(
        registry_bucket_versioned,
        changed(REGISTRY, "registry-versioning", "versioningConfiguration.status", "Suspended"),
    ) == [
        Finding(
            urn(B, "aws:s3/bucketVersioning:BucketVersioning", "registry-versioning"),
            "versioningConfiguration.status of registry bucket 'registry-bucket' is 'Suspended'; set it to 'Enabled'",
        )
    ]
    assert run(registry_bucket_versioned, without(REGISTRY, "registry-versioning")) == [
        Finding(
            urn(B, "aws:s3/bucket:Bucket", "registry-bucket"),
            "registry bucket 'registry-bucket' has no aws:s3/bucketVersioning:BucketVersioning; add one with "
            "versioningConfiguration.status 'Enabled'",
        )
    ]


@pytest.mark.parametrize(
    "setting", ["blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"]
)
def test_registry_bucket_public_access_blocked(setting):
    broken = changed(REGISTRY, "registry-public-access-block", setting, False)
    assert run(registry_bucket_public_access_blocked, broken) == [
        Finding(
            urn(B, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "registry-public-access-block"),
            f"public access block of registry bucket 'registry-bucket' leaves {setting} off; set all four "
            f"settings to true",
        )
    ]


def test_registry_bucket_without_public_access_block():
    assert run(registry_bucket_public_access_blocked, without(REGISTRY, "registry-public-access-block")) == [
        Finding(
            urn(B, "aws:s3/bucket:Bucket", "registry-bucket"),
            "registry bucket 'registry-bucket' has no aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock; add one "
            "with blockPublicAcls, blockPublicPolicy, ignorePublicAcls, restrictPublicBuckets all true",
        )
    ]


SSE_URN = urn(
    B, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration", "registry-encryption"
)


@pytest.mark.parametrize(
    "path, value, message",
    [
        (
            "rules.0.applyServerSideEncryptionByDefault.sseAlgorithm",
            "AES256",
            "rules[0] sseAlgorithm is 'AES256'; set 'aws:kms' with the registry key as kmsMasterKeyId",
        ),
        (
            "rules.0.applyServerSideEncryptionByDefault.kmsMasterKeyId",
            None,
            "rules[0] has no kmsMasterKeyId, so S3 uses the AWS managed key; set the registry's own key",
        ),
        (
            "rules.0.bucketKeyEnabled",
            False,
            "rules[0] bucketKeyEnabled is not true; enable S3 bucket keys (far fewer KMS requests)",
        ),
    ],
)
def test_registry_bucket_encrypted_with_kms(path, value, message):
    broken = changed(REGISTRY, "registry-encryption", path, value)
    assert run(registry_bucket_encrypted_with_kms, broken) == [Finding(SSE_URN, message)]


def test_registry_bucket_tls_only():
    allow_only = {"Statement": [{"Effect": "Deny", "Principal": "*", "Action": "s3:DeleteBucket", "Resource": "*"}]}
    broken = changed(REGISTRY, "registry-tls-only", "policy", json.dumps(allow_only))
    assert run(registry_bucket_tls_only, broken) == [
        Finding(
            urn(B, "aws:s3/bucketPolicy:BucketPolicy", "registry-tls-only"),
            "registry bucket 'registry-bucket' has no policy statement denying requests without TLS; add Deny s3:* for "
            "Principal '*' on the bucket and its objects when aws:SecureTransport is false",
        )
    ]


def test_bucket_parts_are_found_by_name_when_a_document_has_no_dependencies():
    bare = [replace(r, property_dependencies={}) for r in REGISTRY]
    assert run(registry_bucket_versioned, bare) == []
    assert len(run(registry_bucket_versioned, without(bare, "registry-versioning"))) == 1


# --- IAM and cost --------------------------------------------------------------------------------


def serving(resources):
    def retag(r):
        tags = r.props.get("tags")
        if isinstance(tags, dict):
            return changed([r], r.name, "tags", {"mlinfra:role": "serving", "mlinfra:stack": "serving-demo"})[0]
        return r

    return [retag(r) for r in resources]


def test_serving_roles_read_only():
    writer = serving([r for r in TRAINING if not r.name.startswith("guard")])  # the guard writes runs/<run-id>/
    assert run(serving_registry_access_read_only, writer) == [
        Finding(
            urn(T, "aws:iam/rolePolicy:RolePolicy", "node-role-write"),
            "serving policy of 'node-role-write' allows kms:GenerateDataKey, s3:PutObject; serving only reads models/: "
            "grant with RegistryAccess.grant_read(role, 'models/...')",
        )
    ]
    reader = changed(writer, "node-role-write", "policy", json.dumps(read_grant()))
    assert run(serving_registry_access_read_only, reader) == []
    assert run(serving_registry_access_read_only, TRAINING) == []  # training writes checkpoints


def test_stack_hourly_cost_under_ceiling():
    # 4 x p4d.24xlarge at $21.96 + Lustre 4800 GiB PERSISTENT_2 250 MB/s/TiB (0.21/GB-month)
    assert run(stack_hourly_cost_under_ceiling, TRAINING, {"maxHourlyCostUsd": 90}) == []
    assert run(stack_hourly_cost_under_ceiling, TRAINING, {"maxHourlyCostUsd": 50}) == [
        Finding(
            "",
            (
                "the stack may cost $89.22/hour, over the ceiling of $50.00/hour ('fleet': 4 x p4d.24xlarge "
                "at $21.96 = "
                "$87.84; 'fs': Lustre 4800 GiB PERSISTENT_2 250 MB/s/TiB = $1.38); lower node counts or "
                "maximum sizes, or "
                "raise maxHourlyCostUsd in the pack config"
            ),
        )
    ]


def test_unpriced_instance_types_are_advised():
    p5e = changed(TRAINING, "fleet", "launchTemplateConfigs.0.overrides.0.instanceType", "p5e.48xlarge")
    assert run(instance_types_have_catalog_price, p5e) == [
        Finding(
            urn(T, "aws:ec2/fleet:Fleet", "fleet"),
            (
                "p5e.48xlarge has no public on-demand price in the catalog, so the stack's cost ceiling does "
                "not cover it; "
                "check the Capacity Block or reservation price by hand"
            ),
        )
    ]
    assert instance_types_have_catalog_price.RULE.enforcement == "advisory"


def _converter(policy: dict) -> list[Resource]:
    """A serving role bound to the model converter's service account, with one role policy."""
    tags = serving_tags()
    role_type, policy_type = "aws:iam/role:Role", "aws:iam/rolePolicy:RolePolicy"
    return [
        res(role_type, "converter-role", {"tags": tags}, stack=SERVING),
        res(
            "aws:eks/podIdentityAssociation:PodIdentityAssociation",
            "converter-identity",
            {"serviceAccount": "model-converter", "namespace": "models", "tags": tags},
            stack=SERVING,
            deps={"roleArn": [(role_type, "converter-role")]},
        ),
        res(
            policy_type,
            "converter-write",
            {"policy": json.dumps(policy)},
            stack=SERVING,
            deps={"role": [(role_type, "converter-role")]},
        ),
    ]


def _models_write_grant() -> dict:
    return json.loads(json.dumps(write_grant()).replace("checkpoints/run-1/", "models/"))


def test_the_model_converter_may_add_models_and_nothing_else():
    assert run(serving_registry_access_read_only, _converter(_models_write_grant())) == []
    elsewhere = _converter(write_grant())  # checkpoints/run-1/
    message = (
        "model converter policy of 'converter-write' allows s3:PutObject outside models/ or deletes; the "
        "converter only adds objects: grant with RegistryAccess.grant_write(role, 'models/')"
    )
    assert run(serving_registry_access_read_only, elsewhere) == [
        Finding(urn(SERVING, "aws:iam/rolePolicy:RolePolicy", "converter-write"), message)
    ]
    deleting = _models_write_grant()
    deleting["Statement"][1]["Action"].append("s3:DeleteObject")
    assert run(serving_registry_access_read_only, _converter(deleting)) == [
        Finding(
            urn(SERVING, "aws:iam/rolePolicy:RolePolicy", "converter-write"),
            "model converter policy of 'converter-write' allows s3:DeleteObject outside models/ or deletes; "
            "the converter only adds objects: grant with RegistryAccess.grant_write(role, 'models/')",
        )
    ]


def _node_write(document: dict) -> list[Resource]:
    return changed(TRAINING, "node-role-write", "policy", json.dumps(document))


def test_training_writes_only_its_own_runs_prefixes():
    assert run(training_registry_writes_own_run_only, TRAINING) == []
    with_runs = write_grant()
    with_runs["Statement"][1]["Resource"].append("arn:aws:s3:::mlinfra-registry/runs/run-1/*")
    assert run(training_registry_writes_own_run_only, _node_write(with_runs)) == []


@pytest.mark.parametrize(
    ("resources", "shown"),
    [
        (["arn:aws:s3:::mlinfra-registry/models/*"], "arn:aws:s3:::mlinfra-registry/models/*"),
        (["arn:aws:s3:::mlinfra-registry/checkpoints/run-2/*"], "arn:aws:s3:::mlinfra-registry/checkpoints/run-2/*"),
        (["arn:aws:s3:::mlinfra-registry/*"], "arn:aws:s3:::mlinfra-registry/*"),
        (["arn:aws:s3:::mlinfra-registry/checkpoints/run-1/../../models/*"], "checkpoints/run-1/../../models/*"),
    ],
)
def test_a_training_write_outside_its_run_is_refused(resources, shown):
    document = write_grant()
    document["Statement"][1]["Resource"] = resources
    (finding,) = run(training_registry_writes_own_run_only, _node_write(document))
    assert shown in finding.message
    assert finding.message.startswith("training policy of 'node-role-write' allows s3:PutObject on ")
    assert finding.message.endswith(
        "a run writes only checkpoints/run-1/ or runs/run-1/ (models/ is promotion's): grant with "
        "RegistryAccess.grant_write(role, <the run's prefixes>)"
    )


def test_not_resource_and_wildcard_actions_count_as_writes_everywhere():
    document = write_grant()
    document["Statement"][1] = {"Effect": "Allow", "Action": "s3:*", "NotResource": "arn:aws:s3:::other/*"}
    (finding,) = run(training_registry_writes_own_run_only, _node_write(document))
    assert "allows s3:* on NotResource (every object but those listed)" in finding.message
