"""The twin reads its settings from the stack's offline preview: what serving-demo declares is what it runs."""

from __future__ import annotations

import copy

import pytest

from infra.core.errors import InputError
from infra.serving.twin.hpa import Behavior, Policy, Rules
from infra.tools import preview_json
from infra.tools.offline.digest import to_digest
from infra.tools.offline.engine import preview
from infra.tools.simulate.settings import duration_seconds, twins


@pytest.fixture(scope="module")
def digest() -> dict:
    return to_digest(preview("serving-demo"))


def _twins(document: dict):
    return {t.model: t for t in twins(preview_json.parse(document, "demo"), 2.0, 0.1, 60.0, 0.0)}


def test_serving_demo_models_as_declared(digest):
    found = _twins(digest)
    assert sorted(found) == ["llama-3-8b-neuron", "mistral-7b"]
    mistral = found["mistral-7b"]
    scaled = mistral.scaled
    # At zero at night: it cools down for its start-up budget from zero (13.5 min on g5.xlarge, rounded up).
    assert (scaled.min_replicas, scaled.max_replicas, scaled.polling_seconds, scaled.cooldown_seconds) == (
        0,
        6,
        15,
        840,
    )
    assert [(t.name, t.query.series, t.metric_type, t.threshold) for t in scaled.triggers] == [
        ("queue-depth", "waiting", "AverageValue", 8.0),
        ("kv-cache", "kv", "Value", 0.75),
        ("held", "held", "AverageValue", 8.0),
        ("schedule-0", "schedule", "AverageValue", 1.0),
    ]
    # Two replicas from 07:00 on weekdays, asked for 14 minutes ahead (the budget, to the minute), until 20:00.
    (schedule,) = [t for t in scaled.triggers if t.query.series == "schedule"]
    assert schedule.query.windows[0] == ((6 * 60 + 46) * 60.0, 20 * 3600.0, 2.0)
    assert len(schedule.query.windows) == 5
    assert mistral.hold is not None and (mistral.hold.seconds, mistral.hold.max_requests) == (240.0, 200)
    assert mistral.initial_replicas == 0  # Monday 00:00 is night
    assert found["llama-3-8b-neuron"].hold is None and found["llama-3-8b-neuron"].initial_replicas is None
    assert scaled.behavior == Behavior(Rules(0, (Policy("Pods", 2, 60),)), Rules(600, (Policy("Pods", 1, 120),)))
    assert (mistral.perf.device.name, mistral.perf.max_model_len, mistral.perf.configured_max_num_seqs) == (
        "A10G",
        4096,
        256,
    )
    assert (mistral.drain.grace_seconds, mistral.drain.prestop_sleep_seconds, mistral.drain.waits_for_idle) == (
        630.0,
        15.0,
        True,
    )
    assert mistral.scrape_seconds == 15.0
    assert (mistral.autoscaler.unneeded_seconds, mistral.autoscaler.delay_after_add_seconds) == (300.0, 300.0)
    groups = {(g.instance_type, g.spot, g.min_size, g.max_size, g.pods_per_node) for g in mistral.node_groups}
    assert groups == {
        ("g5.xlarge", True, 0, 6, 1),
        ("g5.2xlarge", True, 0, 6, 1),
        ("g5.xlarge", False, 0, 6, 1),  # the on-demand fallbacks behind the Spot groups
        ("g5.2xlarge", False, 0, 6, 1),
    }


def test_a_node_type_the_pod_does_not_fit_holds_no_replica(digest):
    llama = _twins(digest)["llama-3-8b-neuron"]
    fits = {g.instance_type: g.pods_per_node for g in llama.node_groups}
    assert fits == {"inf2.xlarge": 0, "inf2.8xlarge": 1}  # 4 CPUs and 24 GiB asked: more than inf2.xlarge has
    assert llama.scaled.triggers[1].query.divisor == 8.0  # running / maxNumSeqs 8


def _scaler(document: dict) -> dict:
    return next(
        s["newState"]["inputs"]
        for s in document["steps"]
        if s["newState"]["type"] == "kubernetes:keda.sh/v1alpha1:ScaledObject" and "mistral" in s["urn"]
    )


def test_an_unknown_query_is_refused_naming_the_trigger(digest):
    document = copy.deepcopy(digest)
    _scaler(document)["spec"]["triggers"][0]["metadata"]["query"] = "sum(rate(http_requests_total[1m]))"
    with pytest.raises(InputError) as error:
        _twins(document)
    assert [str(p) for p in error.value.problems] == [
        "ScaledObject model-mistral-7b-scaler: spec.triggers[0].metadata.query: not an avg_over_time query: "
        "'sum(rate(http_requests_total[1m]))'"
    ]


def test_a_trigger_of_another_type_is_refused(digest):
    document = copy.deepcopy(digest)
    _scaler(document)["spec"]["triggers"][1]["type"] = "cpu"
    with pytest.raises(InputError) as error:
        _twins(document)
    assert [str(p) for p in error.value.problems] == [
        "ScaledObject model-mistral-7b-scaler: spec.triggers[1]: type 'cpu': the twin reads prometheus and cron "
        "triggers only"
    ]


@pytest.mark.parametrize(("text", "seconds"), [("15s", 15.0), ("5m", 300.0), ("1h", 3600.0), ("250ms", 0.25)])
def test_durations(text, seconds):
    assert duration_seconds(text, "x") == seconds


def test_a_duration_of_two_units_is_refused():
    with pytest.raises(InputError) as error:
        duration_seconds("1m30s", "values.extraArgs.scan-interval")
    assert str(error.value.problems[0]) == (
        "values.extraArgs.scan-interval: '1m30s' is not a duration the twin reads (a number and ms, s, m or h)"
    )


def test_gke_node_pools_are_read():
    document = to_digest(preview("serving-gcp-demo"))
    (twin,) = _twins(document).values()
    (pool,) = twin.node_groups
    assert (pool.instance_type, pool.spot, pool.min_size, pool.max_size, pool.desired, pool.pods_per_node) == (
        "g2-standard-8",
        False,
        1,
        3,
        1,
        1,
    )
    assert twin.perf.device.name == "L4"
    assert pool.price_per_hour == 0.853624


def _with_slo(digest: dict, value: str) -> dict:
    document = copy.deepcopy(digest)
    for step in document["steps"]:
        props = step["newState"]["inputs"]
        if step["newState"]["type"] == "kubernetes:apps/v1:Deployment" and props["metadata"]["name"] == "mistral-7b":
            props["metadata"].setdefault("annotations", {})["mlinfra.io/slo"] = value
    return document


def test_a_model_is_judged_by_its_own_slo_unless_a_flag_says_otherwise(digest):
    document = preview_json.parse(_with_slo(digest, '{"tpotP95Ms": 50, "ttftP95Ms": 800}'), "demo")
    own = {t.model: t for t in twins(document, None, None, 60.0, 0.0)}
    assert (own["mistral-7b"].ttft_slo_seconds, own["mistral-7b"].tpot_slo_seconds) == (0.8, 0.05)
    # a model without slo: the defaults
    assert (own["llama-3-8b-neuron"].ttft_slo_seconds, own["llama-3-8b-neuron"].tpot_slo_seconds) == (2.0, 0.1)
    flagged = {t.model: t for t in twins(document, 1.5, None, 60.0, 0.0)}
    assert (flagged["mistral-7b"].ttft_slo_seconds, flagged["mistral-7b"].tpot_slo_seconds) == (1.5, 0.05)


def test_an_slo_annotation_mlinfra_did_not_write_names_the_deployment(digest):
    document = preview_json.parse(_with_slo(digest, '{"ttftP95Ms": -1}'), "demo")
    with pytest.raises(InputError) as error:
        twins(document, None, None, 60.0, 0.0)
    assert str(error.value.problems[0]) == (
        "Deployment model-mistral-7b-deployment: mlinfra.io/slo is not an SLO written by mlinfra: '{\"ttftP95Ms\": -1}'"
    )


def test_models_behind_an_inference_pool_are_routed_by_the_picker(digest):
    assert {m: t.routing for m, t in _twins(digest).items()} == {"llama-3-8b-neuron": "picker", "mistral-7b": "picker"}
    document = copy.deepcopy(digest)
    for step in document["steps"]:  # no InferencePool holds mistral-7b's pods any more: kube-proxy picks
        values = step["newState"]["inputs"].get("values") or {}
        if str(step["newState"]["inputs"].get("chart", "")).endswith("/inferencepool"):
            labels = values["inferencePool"]["modelServers"]["matchLabels"]
            if labels.get("app.kubernetes.io/instance") == "mistral-7b":
                labels["app.kubernetes.io/instance"] = "someone-else"
    assert _twins(document)["mistral-7b"].routing == "random"


def test_models_behind_the_front_door_get_its_per_key_limits_shared_by_the_routed_models(digest):
    from infra.serving.twin.settings import Limits

    found = {t.model: t for t in twins(preview_json.parse(digest, "demo"), 2.0, 0.1, 60.0, 0.0, callers=3)}
    # serving-demo: 600 requests and 200,000 tokens a minute per key, over its two routed models.
    for twin in found.values():
        assert twin.routing == "picker"
        assert twin.limits == Limits(requests_per_minute=600, tokens_per_minute=200_000, callers=3, share=0.5)
        assert twin.limits.budget() == (300.0, 100_000.0)
    # Without the door's traffic policy, nothing is limited.
    kept = copy.deepcopy(digest)
    kept["steps"] = [s for s in kept["steps"] if not s.get("urn", "").endswith("::front-door-backendtrafficpolicy")]
    assert all(t.limits is None for t in _twins(kept).values())


def test_the_demos_twin_day_is_at_zero_at_night_serves_every_morning_request_and_costs_less(digest):
    """serving-demo's mistral-7b under the office trace (a weekday: traffic from 07:00 to 20:00), its requests
    spread over 20 keys (the front door's per-key limits are not what is measured): the night at zero, replicas
    serving when the window opens, none lost, and the day cheaper than its minimum of 2 all day would be."""
    from infra.serving.queueing import Lengths
    from infra.serving.twin.engine import simulate
    from infra.serving.twin.figures import figures
    from infra.serving.twin.traces import Shape, generate

    (mistral,) = [
        t for t in twins(preview_json.parse(digest, "demo"), None, None, 600.0, 0.0, 20) if t.model == "mistral-7b"
    ]
    shape = Shape("office", 2.0, 86400, Lengths(512, 1536), Lengths(256, 768), mistral.perf.max_model_len, 0)
    outcome = simulate(mistral, generate(shape), 86400)
    f = figures(outcome)
    assert f.requests > 100_000 and f.completed == f.requests
    ready = {round(t): r for t, _, r, _ in outcome.series}
    assert ready[6 * 3600] == 0 and ready[22 * 3600] == 0
    assert ready[7 * 3600] >= 2
    (cheapest,) = {g.price_per_hour for g in mistral.node_groups if g.instance_type == "g5.xlarge"}
    assert f.cost_usd < 0.65 * 2 * 24 * cheapest  # the minimum of 2 all day on the cheapest type
