"""The pack's IAM exposure rules: trust policies open to anyone, bucket and key policies that allow anyone,
broad AWS managed policies on a role, and the metadata service's hop limit. Each with its exact message, and
the narrowing conditions that make a `*` principal acceptable."""

from __future__ import annotations

import json

import pytest

from policies.rules.everywhere import (
    instance_metadata_requires_imdsv2,
    resource_policies_grant_no_one_outside,
    roles_without_broad_managed_policies,
    trust_policies_name_their_principals,
)
from tests.policies.policy_fixtures import res

ROLE, ATTACHMENT = "aws:iam/role:Role", "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
BUCKET_POLICY, KEY = "aws:s3/bucketPolicy:BucketPolicy", "aws:kms/key:Key"


def document(*statements: dict) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def allow(principal, condition: dict | None = None, action="sts:AssumeRole", sid="S") -> dict:
    statement = {"Sid": sid, "Effect": "Allow", "Principal": principal, "Action": action}
    return {**statement, "Condition": condition} if condition else statement


@pytest.mark.parametrize(
    "statement",
    [
        allow({"Service": "lambda.amazonaws.com"}),
        allow({"Service": "scheduler.amazonaws.com"}, {"StringEquals": {"aws:SourceAccount": "123456789012"}}),
        allow({"AWS": "*"}, {"ArnEquals": {"aws:PrincipalArn": "arn:aws:iam::123456789012:role/x"}}),
        allow({"Federated": "accounts.google.com"}, {"StringEquals": {"accounts.google.com:sub": "1"}}),
        {"Effect": "Deny", "Principal": "*", "Action": "sts:AssumeRole"},
    ],
)
def test_named_or_narrowed_trust_passes(statement):
    role = res(ROLE, "role", {"assumeRolePolicy": document(statement)})
    assert trust_policies_name_their_principals.RULE.check(role) == []


@pytest.mark.parametrize(
    "principal, condition",
    [("*", None), ({"AWS": "*"}, None), ({"AWS": ["*"]}, {"Bool": {"aws:SecureTransport": "true"}})],
)
def test_a_trust_open_to_anyone_is_refused(principal, condition):
    role = res(ROLE, "role", {"assumeRolePolicy": document(allow(principal, condition))})
    assert trust_policies_name_their_principals.RULE.check(role) == [
        "assumeRolePolicy statement S lets any principal assume the role; name the service or account that may, or "
        "add a condition on aws:SourceAccount, aws:SourceArn or aws:PrincipalAccount"
    ]


def test_bucket_and_key_policies_allow_nothing_to_anyone():
    tls_only = {"Sid": "TlsOnly", "Effect": "Deny", "Principal": "*", "Action": "s3:*"}
    public = allow("*", action="s3:GetObject", sid="Public")
    bucket = res(BUCKET_POLICY, "policy", {"policy": document(tls_only, public)})
    assert resource_policies_grant_no_one_outside.RULE.check(bucket) == [
        "bucket policy statement Public allows s3:GetObject to any principal; grant a named role or account, or add "
        "a condition on aws:PrincipalAccount, aws:SourceArn or kms:CallerAccount"
    ]
    via_s3 = allow(
        {"AWS": "*"},
        {"StringEquals": {"kms:CallerAccount": "123456789012", "kms:ViaService": "s3.us-east-1.amazonaws.com"}},
        action="kms:Decrypt",
    )
    assert resource_policies_grant_no_one_outside.RULE.check(res(KEY, "key", {"policy": document(via_s3)})) == []
    anyone = allow({"AWS": "*"}, action=["kms:Decrypt", "kms:GenerateDataKey"], sid="Anyone")
    (finding,) = resource_policies_grant_no_one_outside.RULE.check(res(KEY, "key", {"policy": document(anyone)}))
    assert finding.startswith("key policy statement Anyone allows kms:Decrypt, kms:GenerateDataKey to any principal")
    everyone_but = {"Sid": "NotMe", "Effect": "Allow", "NotPrincipal": {"AWS": "arn:aws:iam::1:root"}, "Action": "s3:*"}
    assert resource_policies_grant_no_one_outside.RULE.check(
        res(BUCKET_POLICY, "p", {"policy": document(everyone_but)})
    )


@pytest.mark.parametrize("name", ["AdministratorAccess", "AmazonS3FullAccess", "PowerUserAccess", "IAMFullAccess"])
def test_broad_managed_policies_are_refused_on_attachments_and_roles(name):
    arn = f"arn:aws:iam::aws:policy/{name}"
    expected = [f"{arn} grants far more than this role needs; attach a scoped policy instead"]
    assert roles_without_broad_managed_policies.RULE.check(res(ATTACHMENT, "a", {"policyArn": arn})) == expected
    assert roles_without_broad_managed_policies.RULE.check(res(ROLE, "r", {"managedPolicyArns": [arn]})) == expected


def test_the_managed_policies_mlinfra_attaches_pass():
    for name in ("AmazonSSMManagedInstanceCore", "AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryReadOnly"):
        arn = f"arn:aws:iam::aws:policy/{name}"
        assert roles_without_broad_managed_policies.RULE.check(res(ATTACHMENT, "a", {"policyArn": arn})) == []


def test_a_hop_limit_above_one_lets_containers_reach_the_node_credentials():
    options = {"httpTokens": "required", "httpPutResponseHopLimit": 2}
    template = res("aws:ec2/launchTemplate:LaunchTemplate", "lt", {"metadataOptions": options})
    assert instance_metadata_requires_imdsv2.RULE.check(template) == [
        "metadataOptions.httpPutResponseHopLimit is 2, so containers on the node reach the metadata service and the "
        "node role's credentials; set it to 1 (pods get theirs through Pod Identity)"
    ]
    options["httpPutResponseHopLimit"] = 1
    assert instance_metadata_requires_imdsv2.RULE.check(template) == []


def test_training_compute_ends_with_the_run():
    from policies.rules.training import training_compute_ends_with_the_run
    from tests.policies.policy_fixtures import changed, one, training_resources

    rule = training_compute_ends_with_the_run.RULE
    resources = training_resources()
    assert rule.check(one(resources, "fleet")) == [] and rule.check(one(resources, "template")) == []
    kept = changed(changed(resources, "fleet", "type", "maintain"), "fleet", "terminateInstances", False)
    assert rule.check(one(kept, "fleet")) == [
        "type is maintain: EC2 replaces the nodes the run guard terminates; use 'instant'",
        "terminateInstances is not true: destroying the stack would leave the fleet's nodes running; set it true",
    ]
    stopping = changed(resources, "template", "instanceInitiatedShutdownBehavior", "stop")
    assert rule.check(one(stopping, "template")) == [
        "instanceInitiatedShutdownBehavior is stop: a node that powers off at the end of its job would stop and keep "
        "billing its volumes; set it to 'terminate'"
    ]


def test_the_internet_is_judged_on_public_address_space_however_it_is_spelt():
    """One reading (infra.core.network.covers_internet): more than a /8's worth of public addresses is the internet
    at large, alone (0.0.0.0/1, a public /8) or in pieces (the internet less the private ranges, two public /9s);
    private and documentation ranges admit no public caller."""
    from policies.rules.everywhere import ingress_not_open_to_the_internet
    from policies.rules.serving import eks_api_endpoint_restricted

    def group(cidrs):
        block = {"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": cidrs}
        return res("aws:ec2/securityGroup:SecurityGroup", "sg", {"ingress": [block]})

    fix = "allow the VPC CIDR or peer security groups instead"
    assert ingress_not_open_to_the_internet.RULE.check(group(["0.0.0.0/1", "128.0.0.0/1"])) == [
        f"ingress[0] admits 0.0.0.0/1 (tcp 22); {fix}",
        f"ingress[0] admits 128.0.0.0/1 (tcp 22); {fix}",
    ]
    assert ingress_not_open_to_the_internet.RULE.check(group(["8.0.0.0/9", "8.128.0.0/9"])) == [
        "ingress admits 8.0.0.0/9, 8.128.0.0/9, which together admit 16,777,216 public IPv4 addresses (0.5% of "
        f"them), the internet at large; {fix}"
    ]
    private = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "198.51.100.0/24"]
    assert ingress_not_open_to_the_internet.RULE.check(group(private)) == []
    assert ingress_not_open_to_the_internet.RULE.check(group(["8.8.0.0/16", "1.1.1.0/24"])) == []  # named networks

    less_private = {"endpointPublicAccess": True, "publicAccessCidrs": ["128.0.0.0/1", "0.0.0.0/2", "64.0.0.0/2"]}
    found = eks_api_endpoint_restricted.RULE.check(res("aws:eks/cluster:Cluster", "eks", {"vpcConfig": less_private}))
    assert len(found) == 3 and all(f.startswith("vpcConfig.publicAccessCidrs includes ") for f in found)
    pieces = {"endpointPublicAccess": True, "publicAccessCidrs": ["8.0.0.0/9", "8.128.0.0/9", "203.0.113.0/24"]}
    assert eks_api_endpoint_restricted.RULE.check(res("aws:eks/cluster:Cluster", "eks", {"vpcConfig": pieces})) == [
        "vpcConfig.publicAccessCidrs 8.0.0.0/9, 8.128.0.0/9 together admit 16,777,216 public IPv4 addresses (0.5% of "
        "them), the internet at large; list only the networks that administer the cluster"
    ]
    named = {"endpointPublicAccess": True, "publicAccessCidrs": ["203.0.113.0/24", "8.8.0.0/16"]}
    assert eks_api_endpoint_restricted.RULE.check(res("aws:eks/cluster:Cluster", "eks", {"vpcConfig": named})) == []
