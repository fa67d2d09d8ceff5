"""`mlinfra:registryStack` is checked before anything is declared: exit 2 naming the key, not a KeyError on a
missing output halfway through the preview."""

from __future__ import annotations

import pytest

from infra.cli import main
from infra.registry.reference import registry_stack_findings


@pytest.mark.parametrize("stack", ["training-demo", "serving-demo"])
@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("nope", "'nope' is not a stack of this project; aws registry stacks here: registry, registry-us-east-2"),
        ("serving-demo", "'serving-demo' is not a registry stack on aws"),
        ("registry-gcp-mirror", "'registry-gcp-mirror' is not a registry stack on aws"),
    ],
)
def test_an_unknown_registry_stack_exits_2_naming_the_key(stack, reference, message, capsys):
    assert main(["preview", "--stack", stack, "-c", f"mlinfra:registryStack={reference}"]) == 2
    err = capsys.readouterr().err
    assert f"error: mlinfra:registryStack: {message}" in err and "KeyError" not in err


def test_a_registry_of_this_project_or_another_projects_is_accepted():
    assert registry_stack_findings("registry") == []
    assert registry_stack_findings("registry-us-east-2") == []
    assert registry_stack_findings("acme/ml-platform/registry") == []  # read at deploy time only
