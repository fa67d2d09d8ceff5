"""models-at-zero-are-held-and-woken on the objects mlinfra writes for a model that scales to zero (its Deployment,
ScaledObject and picker release) and on each way one of them can be broken."""

from __future__ import annotations

import copy

from infra.providers import tokens as t
from infra.serving import gateway_charts, manifests, startup
from infra.serving.aws.config import AwsModelSpec
from policies.rules.serving import models_at_zero_are_held_and_woken as rule
from tests.policies.policy_fixtures import DEPLOYMENT, SCALED_OBJECT, SERVING, res, stack_of

MODEL = AwsModelSpec.model_validate(
    {"name": "m", "version": "1", "image": "vllm/vllm-openai:v0.33.0", "accelerator": "g5", "minReplicas": 0,
     "scaleToZero": {}}
)  # fmt: skip
REGISTRY = manifests.Registry(bucket="b", region="us-east-1")
BUDGETS = startup.model_budgets(MODEL, {"g5.xlarge": 10.0})


def objects(model: AwsModelSpec = MODEL) -> dict:
    return {
        "deployment": manifests.deployment(model, "models", REGISTRY, BUDGETS),
        "scaler": manifests.scaled_object(model, "models", BUDGETS),
        "picker": {
            "chart": gateway_charts.inference_pool_chart(model, "models").chart,
            "values": gateway_charts.inference_pool_values(model),
        },
    }


def messages(found: dict) -> list[str]:
    resources = [
        res(DEPLOYMENT, "m-deployment", found["deployment"], SERVING),
        res(SCALED_OBJECT, "m-scaler", found["scaler"], SERVING),
        res(t.K8S_HELM_RELEASE, "pool-m", found["picker"], SERVING),
    ]
    return [f.message for f in rule.RULE.check(stack_of(resources), rule.RULE.defaults())]


def test_what_mlinfra_writes_for_a_model_at_zero_passes():
    assert messages(objects()) == []
    warm = AwsModelSpec.model_validate({**MODEL.model_dump(by_alias=True, exclude_none=True), "minReplicas": 1,
                                        "scaleToZero": None})  # fmt: skip
    assert messages(objects(warm)) == []  # never at zero: nothing to hold


def test_a_picker_without_flow_control_is_a_violation():
    found = objects()
    found["picker"]["values"]["inferenceExtension"].pop("pluginsConfigFile")
    (message,) = messages(found)
    assert "no endpoint picker holds its requests" in message and "flowControl" in message


def test_no_picker_at_all_and_an_unset_minimum_are_judged_as_zero():
    found = objects()
    del found["picker"]["values"]["inferencePool"]["modelServers"]
    del found["scaler"]["spec"]["minReplicaCount"]  # KEDA's default is 0
    (message,) = messages(found)
    assert "no endpoint picker holds its requests" in message


def test_a_scaler_that_cannot_see_the_held_requests_never_wakes():
    found = objects()
    spec = found["scaler"]["spec"]
    spec["triggers"] = [trigger for trigger in spec["triggers"] if trigger["name"] != "held"]
    (message,) = messages(found)
    assert "none of its triggers reads the requests held for it" in message


def test_a_cooldown_shorter_than_the_start_up_from_zero_flaps():
    found = objects()
    found["scaler"]["spec"]["cooldownPeriod"] = 300
    (message,) = messages(found)
    slow = startup.slowest(BUDGETS)
    assert f"cooldownPeriod 300 s is shorter than the replica's start-up from zero ({slow.from_zero_seconds:.0f} s" in (
        message
    )
    del found["scaler"]["spec"]["cooldownPeriod"]  # KEDA's default, 300 s
    assert len(messages(found)) == 1


def test_idle_replicas_at_zero_count_and_a_missing_or_forged_budget_is_a_finding():
    found = objects()
    found["scaler"]["spec"]["minReplicaCount"] = 1
    found["scaler"]["spec"]["idleReplicaCount"] = 0
    assert messages(found) == []
    forged = copy.deepcopy(found)
    forged["deployment"]["metadata"]["annotations"][startup.STARTUP_ANNOTATION] = '{"g5.xlarge": {"node": 1}}'
    (message,) = messages(forged)
    assert "is not a start-up budget written by mlinfra" in message
    del found["deployment"]["metadata"]["annotations"][startup.STARTUP_ANNOTATION]
    (message,) = messages(found)
    assert f"has no {startup.STARTUP_ANNOTATION} annotation" in message
