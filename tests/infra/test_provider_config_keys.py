"""A provider namespace's keys are the provider's own: the recorded list is the installed SDKs' ProviderArgs, and a
typo (`aws:regoin`) exits 2 naming the key and the nearest real one, where the provider would ignore it."""

from __future__ import annotations

from importlib.metadata import version

import pulumi_aws
import pulumi_gcp
import pytest

from infra.catalog import provider_config
from infra.kinds import provider_key_findings
from infra.providers import schema
from tests.helpers import run_cli


@pytest.mark.parametrize("provider, sdk", [("aws", pulumi_aws), ("gcp", pulumi_gcp)])
def test_the_recorded_keys_are_the_installed_sdks(provider, sdk):
    assert provider_config.config_keys(provider) == tuple(sorted(schema.object_properties(sdk.ProviderArgs)))
    assert provider_config.sdk(provider) == f"{sdk.__name__} {version(sdk.__name__)}"


def test_known_keys_pass_and_typos_are_named_with_the_nearest_key():
    assert provider_key_findings({"aws:region": "us-east-1", "aws:defaultTags": {"tags": {}}, "mlinfra:x": 1}) == []
    assert provider_key_findings({"gcp:project": "p-123456", "gcp:region": "us-central1", "kubernetes:x": 1}) == []
    (problem,) = provider_key_findings({"aws:regoin": "us-east-1"})
    assert problem.path == "aws:regoin" and problem.message.endswith("did you mean aws:region?")
    (problem,) = provider_key_findings({"gcp:zzz": "x"})
    assert problem.path == "gcp:zzz" and "not a config key of the gcp provider" in problem.message


def test_a_typo_exits_2_before_anything_is_declared():
    result = run_cli("preview", "--stack", "training-demo", "-c", "aws:skipCredentialValidation=true")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "aws:skipCredentialValidation: not a config key" in result.stderr
    assert "did you mean aws:skipCredentialsValidation?" in result.stderr
    assert "Traceback" not in result.stderr and "to create" not in result.stdout
