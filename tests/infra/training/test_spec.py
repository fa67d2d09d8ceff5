"""Sizes that would overflow a service's field, or are not numbers at all, are refused in the config tier."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from infra.cli import main
from infra.training.spec import MAX_INTENT_GIB, LustreIntentSpec


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 2.0**63, MAX_INTENT_GIB + 1])
@pytest.mark.parametrize("key", ["datasetGib", "checkpointGib"])
def test_sizes_past_a_pebibyte_or_not_finite_are_refused(key, value):
    with pytest.raises(ValidationError):
        LustreIntentSpec.model_validate({key: value})


def test_the_cli_names_the_key(capsys):
    assert main(["preview", "--stack", "training-demo", "-c", f"mlinfra:training.lustre.datasetGib={2**63}"]) == 2
    assert capsys.readouterr().err == (
        f"error: mlinfra:training.lustre.datasetGib: must be at most {float(MAX_INTENT_GIB)} (got {2**63})\n"
    )
