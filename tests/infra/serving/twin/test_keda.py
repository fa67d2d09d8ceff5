"""KEDA's metric handling against its docs (keda.sh/docs/2.15 and 2.16 reference/scaledobject-spec, read
2026-11-27: pollingInterval 30, cooldownPeriod 300, minReplicaCount 0, maxReplicaCount 100 by default;
activation above activationThreshold; 0 <-> 1 scaling by KEDA itself) and the queries mlinfra writes."""

from __future__ import annotations

import pytest

from infra.serving.twin.keda import Query, Trigger, UnknownQuery, activation, parse_query
from tests.infra.serving.twin.twins import scaled

# The queries of serving-demo's ScaledObjects as the preview has them.
WAITING = (
    'sum(avg_over_time(vllm:num_requests_waiting{namespace="models",app_kubernetes_io_instance="mistral-7b"}[1m])) '
    "or vector(0)"
)
RUNNING = (
    '(avg(avg_over_time(vllm:num_requests_running{namespace="models",app_kubernetes_io_instance="llama"}[1m])) '
    "/ 8) or vector(0)"
)
KV = (
    '(avg(avg_over_time(vllm:kv_cache_usage_perc{namespace="models",app_kubernetes_io_instance="m"}[1m]) or '
    'avg_over_time(vllm:gpu_cache_usage_perc{namespace="models",app_kubernetes_io_instance="m"}[1m]))) or vector(0)'
)


def test_mlinfra_queries_are_read_as_written():
    assert parse_query(WAITING) == Query("waiting", "sum", 60.0)
    assert parse_query(RUNNING) == Query("running", "avg", 60.0, 8.0)
    assert parse_query(KV) == Query("kv", "avg", 60.0)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("sum(vllm:num_requests_waiting)", "no [range] in 'sum(vllm:num_requests_waiting)'"),
        ("sum(rate(x[1m]))", "not an avg_over_time query: 'sum(rate(x[1m]))'"),
        ("max(avg_over_time(vllm:num_requests_waiting[1m]))", "neither sum(...) nor avg(...): "
         "'max(avg_over_time(vllm:num_requests_waiting[1m]))'"),
        ("sum(avg_over_time(http_requests[5m]))", "no vLLM series the twin models in "
         "'sum(avg_over_time(http_requests[5m]))'"),
    ],
)  # fmt: skip
def test_other_queries_are_refused_by_name(query, message):
    with pytest.raises(UnknownQuery) as error:
        parse_query(query)
    assert str(error.value) == message


def test_query_values_aggregate_each_pods_window_average():
    assert Query("waiting", "sum", 60).value([3.0, 5.0]) == 8.0
    assert Query("running", "avg", 60, 8.0).value([4.0, 8.0]) == 0.75
    assert Query("kv", "avg", 60).value([]) == 0.0  # `or vector(0)`: no pods, no series


def test_average_value_trigger_is_total_over_target_per_pod():
    trigger = Trigger("queue", Query("waiting", "sum", 60), "AverageValue", 8.0)
    assert trigger.replicas(2, 2, 20.0) == 3
    assert trigger.replicas(2, 2, 16.5) == 2  # within the tolerance


def test_value_trigger_scales_the_ready_pods_by_the_ratio():
    trigger = Trigger("kv", Query("kv", "avg", 60), "Value", 0.75)
    assert trigger.replicas(2, 2, 0.9) == 3  # ceil(1.2 x 2)
    assert trigger.replicas(2, 2, 0.8) == 2  # ratio 1.067: within 0.1
    assert trigger.replicas(4, 2, 1.5) == 4  # ceil(2 x 2): ready pods, not the desired count


def test_keda_wakes_a_scaled_to_zero_target_when_a_trigger_is_active():
    zero = scaled(min_replicas=0)
    assert activation(zero, 100.0, 0, [0.5, 0.0], 0.0) == (1, 100.0)
    assert activation(zero, 100.0, 0, [0.0, 0.0], 0.0) == (None, 0.0)


def test_keda_scales_to_zero_after_the_cooldown_only():
    zero = scaled(min_replicas=0, cooldown_seconds=300)
    assert activation(zero, 299.0, 2, [0.0, 0.0], 0.0) == (None, 0.0)
    assert activation(zero, 300.0, 2, [0.0, 0.0], 0.0) == (0, 0.0)
    assert activation(scaled(), 900.0, 2, [0.0, 0.0], 0.0) == (None, 0.0)  # minReplicaCount 2: never to zero


def test_the_hpa_keda_makes_has_at_least_one_replica():
    assert scaled(min_replicas=0).hpa_min == 1
    assert scaled(min_replicas=3).hpa_min == 3
