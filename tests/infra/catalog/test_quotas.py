"""The quota table (data/aws_quotas.json): every type a stack accepts has its vCPU quota, and the codes agree with
the pinned sources the test can read."""

from __future__ import annotations

import re

import pytest
from moto.servicequotas.resources.default_quotas.vpc import VPC_DEFAULT_QUOTAS

from infra.catalog.aws.quotas import family_prefix, network_interface_quota, vcpu_quota, vcpu_quotas
from infra.catalog.roles import types_for


@pytest.mark.parametrize(
    ("name", "prefix"),
    [
        ("p5en.48xlarge", "p"),
        ("p4d.24xlarge", "p"),
        ("trn1n.32xlarge", "trn"),
        ("trn2.48xlarge", "trn"),
        ("inf2.xlarge", "inf"),
        ("g6e.12xlarge", "g"),
        ("vt1.3xlarge", "vt"),
        ("im4gn.large", "im"),
        ("t3.micro", "t"),
        ("u-6tb1.metal", None),
    ],
)
def test_family_prefix_is_the_letters_before_the_generation(name, prefix):
    assert family_prefix(name) == prefix


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("p4d.24xlarge", "L-417A185B"),
        ("trn1.32xlarge", "L-2C3B7624"),
        ("g5.xlarge", "L-DB2E81BA"),
        ("inf2.xlarge", "L-1945791B"),
        ("t3.micro", "L-1216C47A"),
        ("hpc7g.16xlarge", None),  # HPC has its own quota, not in the table: not guessed
    ],
)
def test_vcpu_quota_by_family(name, code):
    quota = vcpu_quota(name)
    assert (quota.quota_code if quota else None) == code


def test_every_type_a_stack_accepts_has_a_vcpu_quota():
    for role in ("training", "serving"):
        for name in types_for(role):
            assert vcpu_quota(name) is not None, name


def test_codes_are_service_quotas_codes_and_each_family_prefix_is_in_one_quota():
    prefixes = [p for q in vcpu_quotas() for p in q.prefixes]
    assert len(prefixes) == len(set(prefixes))
    for quota in (*vcpu_quotas(), network_interface_quota()):
        assert re.fullmatch(r"L-[0-9A-F]{8}", quota.quota_code), quota
        assert quota.confirmed_by


def test_network_interface_quota_matches_the_pinned_moto_copy_of_aws_defaults():
    (pinned,) = [q for q in VPC_DEFAULT_QUOTAS if q["QuotaCode"] == network_interface_quota().quota_code]
    assert (pinned["ServiceCode"], pinned["QuotaName"]) == ("vpc", network_interface_quota().name)


def test_increase_command_names_the_quota_the_value_and_the_region():
    assert vcpu_quota("p5.48xlarge").increase_command(768, "us-east-1") == (
        "aws service-quotas request-service-quota-increase --service-code ec2 --quota-code L-417A185B "
        "--desired-value 768 --region us-east-1"
    )
