"""What the fit check writes on the Deployment and how the engine follows the precision."""

from __future__ import annotations

import pytest

from infra.serving import engine, fit, manifests
from infra.serving.aws.config import AwsModelSpec
from infra.serving.model_shape import load_model_shape
from tests.helpers import ROOT

BASE = {"name": "m", "version": "1", "image": "vllm/vllm-openai:v0.33.0"}


def model(**fields) -> AwsModelSpec:
    return AwsModelSpec.model_validate({**BASE, **fields})


def test_the_deployment_carries_the_architecture_and_precision_it_was_checked_with():
    entry = model(accelerator="g5", modelConfig="stacks/models/llama-3-8b/config.json")
    meta = manifests.deployment_metadata(entry, "models")
    shape = fit.shape_from_annotation(meta["annotations"][fit.ARCHITECTURE_ANNOTATION])
    assert shape == load_model_shape(ROOT / "stacks/models/llama-3-8b/config.json")
    assert meta["annotations"][fit.PRECISION_ANNOTATION] == "bf16"
    assert "annotations" not in manifests.deployment_metadata(model(accelerator="g5"), "models")


def test_t4_serves_fp16_because_it_has_no_bf16():
    # vLLM refuses --dtype bfloat16 below compute capability 8.0: a T4 server must be told float16.
    t4 = model(accelerator="g4dn")
    assert engine.precision_of(t4).name == "fp16" and engine.engine_settings(t4).dtype == "float16"
    assert engine.engine_settings(model(accelerator="g5")).dtype == "bfloat16"
    assert engine.engine_settings(model(accelerator="g6", precision="fp16")).dtype == "float16"
    assert engine.engine_settings(model(accelerator="inf2")).dtype == "bfloat16"


def test_an_annotation_that_is_not_a_shape_is_refused():
    for value in ("not json", "[1]", '{"layers": 2}'):
        with pytest.raises(ValueError, match="is not a model architecture written by mlinfra"):
            fit.shape_from_annotation(value)
