"""The twin's event loop: every request and token accounted for, the same figures for the same seed, and the
peers' production failures (issue 21) reproduced by their configuration and avoided by mlinfra's defaults."""

from __future__ import annotations

from infra.serving.queueing import Lengths
from infra.serving.twin.engine import simulate
from infra.serving.twin.figures import figures
from infra.serving.twin.hpa import Behavior, Policy, Rules
from infra.serving.twin.settings import Drain, Limits
from infra.serving.twin.traces import Shape, generate
from tests.infra.serving.twin.twins import MLINFRA_BEHAVIOR, group, scaled, twin

PROMPT, OUTPUT = Lengths(512, 1536), Lengths(256, 768)
WINDOWLESS = Behavior(Rules(0, (Policy("Percent", 100, 15),)), Rules(0, (Policy("Percent", 100, 15),)))


def _trace(name: str, rate: float, seconds: float, seed: int = 1, start: float = 0.0):
    return [(start + t, p, o) for t, p, o in generate(Shape(name, rate, seconds, PROMPT, OUTPUT, 4096, seed))]


def test_every_request_and_token_is_accounted_for():
    trace = _trace("burst", 3.0, 3600)
    outcome = simulate(twin(spot_interruptions_per_node_hour=2.0, node_groups=(group(spot=True),)), trace, 3600, 5)
    tally = outcome.tally
    assert tally.arrived == len(trace)
    assert tally.accounted == tally.arrived
    assert tally.output_tokens + tally.unserved_tokens == sum(o for _, _, o in trace)
    assert sum(tally.ttft_ms.values()) == sum(tally.tpot_ms10.values()) == tally.completed
    assert min(tally.ttft_ms) >= 0 and min(tally.tpot_ms10) >= 0


def test_node_hours_are_the_nodes_held_over_time():
    outcome = simulate(twin(), _trace("ramp", 4.0, 7200), 7200, 1)
    held = sum(outcome.node_seconds.values())
    sampled = sum(nodes for _, _, _, nodes in outcome.series) * 60  # one sample a minute
    assert abs(held - sampled) <= 60 * max(n for *_, n in outcome.series) * 2


def test_the_same_seed_gives_the_same_figures():
    runs = [figures(simulate(twin(), _trace("diurnal", 3.0, 3600, seed=7), 3600, 7)) for _ in range(2)]
    assert runs[0] == runs[1]
    other = figures(simulate(twin(), _trace("diurnal", 3.0, 3600, seed=8), 3600, 8))
    assert other != runs[0]


def _peak_then_quiet():
    return _trace("steady", 10.0, 1800) + _trace("steady", 0.5, 3600, start=1800.0)


def test_scale_down_does_not_kill_requests_with_mlinfras_drain():
    # dstack #2656: replicas scaled down mid-request. mlinfra's preStop waits until vLLM is idle, within a grace
    # period longer than a request may run; a server stopped at SIGTERM after a short grace loses requests.
    mlinfra = simulate(twin(), _peak_then_quiet(), 5400, 1)
    abrupt = simulate(twin(drain=Drain(30.0, 0.0, False)), _peak_then_quiet(), 5400, 1)
    assert mlinfra.scale_changes == abrupt.scale_changes >= 2  # it scaled up, then down
    assert mlinfra.tally.killed == 0
    assert abrupt.tally.killed > 0


def test_mlinfras_behaviour_does_not_flap_where_a_windowless_hpa_does():
    # dynamo #9294: flapping between replica counts under a steady load. mlinfra's 600 s scale-down window and
    # one-pod-per-two-minutes policy hold the count; without windows it reverses again and again.
    trace = _trace("steady", 4.0, 7200, seed=3)
    held = simulate(twin(scaled=scaled(min_replicas=1, behavior=MLINFRA_BEHAVIOR)), trace, 7200, 3)
    flapping = simulate(twin(scaled=scaled(min_replicas=1, behavior=WINDOWLESS)), trace, 7200, 3)
    assert held.direction_changes <= 2
    assert flapping.direction_changes >= 5 * max(1, held.direction_changes)
    assert figures(held).over_slo_share < figures(flapping).over_slo_share


def test_scale_from_zero_on_the_servers_own_queue_never_wakes():
    # skypilot #3359: scale-from-zero that never wakes. The queue-depth metric comes from the replicas; with
    # none there is no queue to see, so KEDA never activates. mlinfra keeps at least one replica (minReplicas >= 1).
    trace = _trace("steady", 1.0, 600) + _trace("steady", 1.0, 1800, start=1800.0)
    zero = simulate(twin(scaled=scaled(min_replicas=0, cooldown_seconds=300)), trace, 3600, 1)
    kept = simulate(twin(), trace, 3600, 1)
    late = [t for t, _, _ in trace if t >= 1800]
    assert zero.tally.refused == len(late)  # every request after the quiet spell: refused
    assert kept.tally.refused == 0


def test_nodes_running_replicas_are_never_removed():
    # Busy GPU nodes consolidated away: the cluster autoscaler removes only nodes without a replica.
    outcome = simulate(twin(node_groups=(group(min_size=0, desired=3),)), _trace("steady", 0.5, 3600), 3600, 1)
    assert outcome.series[-1][3] == 2  # the empty third node went after scale-down-unneeded-time
    assert outcome.series[-1][2] == 2  # both replicas still ready
    assert outcome.tally.killed == 0
    assert round(sum(outcome.node_seconds.values())) == 2 * 3600 + 600


def test_spot_reclaims_drain_within_the_notice_and_the_pods_come_back():
    trace = _trace("steady", 2.0, 7200)
    spot = twin(node_groups=(group(spot=True),), spot_interruptions_per_node_hour=1.0)
    outcome = simulate(spot, trace, 7200, 2)
    assert outcome.reclaims >= 2
    assert outcome.nodes_launched >= 2 + outcome.reclaims  # each reclaimed node replaced
    assert outcome.series[-1][2] == 2  # the replicas are back
    assert outcome.tally.accounted == len(trace)
    calm = simulate(twin(node_groups=(group(spot=True),)), trace, 7200, 2)
    assert (calm.reclaims, calm.nodes_launched) == (0, 2)


def test_the_endpoint_picker_beats_kube_proxys_random_choice_on_the_same_load():
    """Fixed replicas under a steady load near their capacity: the picker (shortest queue, emptiest KV cache)
    keeps queues short where a random choice lets one replica's queue grow while another idles."""
    fixed = scaled(min_replicas=3, max_replicas=3)
    trace = _trace("steady", 9.0, 1800, seed=3)
    random_choice = figures(simulate(twin(scaled=fixed, initial_replicas=3), trace, 1800, 3))
    picked_outcome = simulate(twin(scaled=fixed, initial_replicas=3, routing="picker"), trace, 1800, 3)
    picked = figures(picked_outcome)
    assert picked_outcome.tally.accounted == picked_outcome.tally.arrived == len(trace)
    assert picked.ttft_ms["p95"] < random_choice.ttft_ms["p95"]
    assert picked.ttft_ms["p99"] < random_choice.ttft_ms["p99"]


def test_the_picker_is_deterministic_for_a_seed():
    runs = [figures(simulate(twin(routing="picker"), _trace("burst", 4.0, 1800, seed=2), 1800, 2)) for _ in range(2)]
    assert runs[0] == runs[1]


def test_the_gateway_s_limits_refuse_a_key_past_its_minute_and_reset_on_the_next():
    """Fixed one-minute windows per key: a key's requests past requestsPerMinute within a minute get 429 (never
    reach a replica); the next minute starts again; spread over more keys, the same traffic passes."""
    trace = [(m * 60.0 + i * 0.5, 100, 50) for m in range(3) for i in range(20)]  # 20 requests in each minute
    limited = simulate(twin(routing="picker", limits=Limits(requests_per_minute=8)), trace, 180, 1)
    assert limited.tally.limited == 3 * (20 - 8)
    assert limited.tally.accounted == limited.tally.arrived == len(trace)
    assert limited.tally.output_tokens + limited.tally.unserved_tokens == sum(o for _, _, o in trace)
    assert figures(limited).limited == 36 and figures(limited).over_slo_share >= 36 / 60
    spread = simulate(twin(routing="picker", limits=Limits(requests_per_minute=8, callers=3)), trace, 180, 1)
    assert spread.tally.limited == 0
    # A key's budget shared over two models: each model's traffic gets half of it.
    shared = simulate(twin(routing="picker", limits=Limits(requests_per_minute=8, share=0.5)), trace, 180, 1)
    assert shared.tally.limited == 3 * (20 - 4)


def test_the_token_limit_refuses_once_the_minute_s_tokens_are_spent():
    trace = [(i * 1.0, 300, 100) for i in range(30)]  # 400 tokens a request, one a second
    outcome = simulate(twin(routing="picker", limits=Limits(None, tokens_per_minute=2000)), trace, 60, 1)
    # 2000 tokens: the first five requests spend them (the fifth reaches the limit), the rest of the minute is 429.
    assert outcome.tally.limited == 25
