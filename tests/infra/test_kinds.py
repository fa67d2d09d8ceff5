import typing

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from infra.core.errors import InputError
from infra.core.namespace import namespace_values
from infra.kinds import STACK_KINDS, load, validate
from infra.registry.aws.config import RegistrySpec
from tests.helpers import ROOT


def stack_values(stack: str) -> dict:
    config = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text(encoding="utf-8"))["config"]
    return namespace_values(config)


def problems(values: dict) -> list[str]:
    with pytest.raises(InputError) as caught:
        validate(values)
    return [str(p) for p in caught.value.problems]


def test_registry_stack_file_is_valid_and_secure_by_default():
    config = validate(stack_values("registry"))
    assert config.kind == "registry"
    assert config.registry.event_bridge is True
    assert RegistrySpec().lifecycle.abort_incomplete_upload_days == 7


def test_structured_values_arrive_as_json_strings_under_pulumi():
    values = namespace_values(
        {"mlinfra:kind": "registry", "mlinfra:registry": '{"objectLock": {"enabled": true}}', "aws:region": "us-east-1"}
    )
    assert validate(values).registry.object_lock.enabled is True


@pytest.mark.parametrize(
    "values, expected",
    [
        ({}, ["mlinfra:kind: required; one of registry, training, serving"]),
        ({"kind": "bogus"}, ["mlinfra:kind: 'bogus' is not a stack kind; allowed: registry, training, serving"]),
        (
            {"kind": "registry", "registy": {}},
            ["mlinfra:registy: unknown key (did you mean 'registry'?); allowed: kind, registry"],
        ),
        (
            {"kind": "registry", "registry": {"bucketName": "Bad_Name"}},
            [
                "mlinfra:registry.bucketName: not a valid S3 bucket name: 3-63 characters of a-z, 0-9, '.' and '-', "
                "starting and ending with a letter or digit (got 'Bad_Name')"
            ],
        ),
        (
            {"kind": "registry", "registry": {"objectLock": {"mode": "STRICT"}}},
            ["mlinfra:registry.objectLock.mode: must be one of 'GOVERNANCE', 'COMPLIANCE' (got 'STRICT')"],
        ),
        (
            {"kind": "registry", "registry": {"kmsKeyDeletionWindowDays": 3}},
            ["mlinfra:registry.kmsKeyDeletionWindowDays: must be at least 7 (got 3)"],
        ),
        (
            {"kind": "registry", "registry": {"lifecycle": {"noncurrentVersionDays": 0}}},
            ["mlinfra:registry.lifecycle.noncurrentVersionDays: must be at least 1 (got 0)"],
        ),
        (
            {"kind": "registry", "registry": {"eventBridge": "maybe"}},
            ["mlinfra:registry.eventBridge: Input should be a valid boolean (got 'maybe')"],
        ),
        (
            {"kind": "registry", "registry": {"lifecycle": {"abortIncompleteUploadDays": True}}},
            ["mlinfra:registry.lifecycle.abortIncompleteUploadDays: Input should be a valid integer (got True)"],
        ),
        (
            {"kind": "registry", "registry": {"bucketNamePrefix": "xn--models"}},
            [
                "mlinfra:registry.bucketNamePrefix: default bucket names built from it would be invalid: must "
                "not start with "
                "'xn--' (got 'xn--models')"
            ],
        ),
        (
            {"kind": "registry", "registry": {"bucketNamePrefix": "-x"}},
            ["mlinfra:registry.bucketNamePrefix: String should have at least 3 characters (got '-x')"],
        ),
    ],
)
def test_each_broken_field_is_named_with_what_is_allowed(values, expected):
    assert problems(values) == expected


def test_all_problems_are_reported_at_once():
    found = problems({"kind": "registry", "registry": {"objectLock": {"retentionDays": 0, "mode": "X"}, "nope": 1}})
    assert len(found) == 3
    assert all(line.startswith("mlinfra:registry.") for line in found)


def _models() -> set[type[BaseModel]]:
    seen: set[type[BaseModel]] = set()

    def visit(model: type[BaseModel]) -> None:
        if model in seen:
            return
        seen.add(model)
        for field in model.model_fields.values():
            for arg in (field.annotation, *typing.get_args(field.annotation)):
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    visit(arg)

    for row in STACK_KINDS:
        visit(row.model)
    return seen


def test_every_config_field_is_described_and_models_forbid_unknown_keys():
    for model in _models():
        assert model.model_config.get("extra") == "forbid", model
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "retentionDays": st.integers(1, 36500),
            "mode": st.sampled_from(["GOVERNANCE", "COMPLIANCE"]),
            "enabled": st.booleans(),
        },
    ),
    st.integers(1, 3650),
    st.integers(7, 30),
)
def test_every_valid_registry_spec_validates_and_keeps_its_values(lock, days, window):
    values = {
        "kind": "registry",
        "registry": {
            "objectLock": lock,
            "kmsKeyDeletionWindowDays": window,
            "lifecycle": {"noncurrentVersionDays": days},
        },
    }
    spec = validate(values).registry
    assert spec.lifecycle.noncurrent_version_days == days
    assert spec.kms_key_deletion_window_days == window
    assert spec.object_lock.retention_days == lock.get("retentionDays", 30)


def test_provider_region_is_checked_with_the_stack_config():
    with pytest.raises(InputError) as caught:
        load({"aws:region": "2020-01-01", "mlinfra:kind": "registry"})
    assert [str(p) for p in caught.value.problems] == [
        "aws:region: must be an AWS region name such as us-east-1 (got '2020-01-01')"
    ]
