"""Cost per token of serving stacks: each model server's $ per million output tokens at the predicted
throughput, next to its $/hour, in `cost` (text and JSON) and the PR report."""

from __future__ import annotations

import pytest

from infra.tools.cost.cli import stack_cost
from infra.tools.cost.render import markdown, render, to_json


@pytest.fixture(scope="module")
def families():
    return stack_cost("serving-gpu-families")[1]


def test_every_model_server_gets_its_cost_per_million_tokens(families):
    servers = {s["model"]: s for s in to_json(families)["modelServers"]}
    assert set(servers) == {"llama-3-2-3b-t4", "llama-3-8b-l4", "llama-3-70b-l40s"}
    for server in servers.values():
        per_million = server["usdPerHourPerReplica"] / (server["outputTokensPerSecondPerReplica"] * 3600) * 1e6
        assert server["usdPerMillionOutputTokens"] == pytest.approx(per_million, rel=1e-3)
    # The slo bounds the batch: TPOT stays within 80 ms; without one the engine's full batch runs.
    assert servers["llama-3-8b-l4"]["tpotMs"] <= 80 and "within 80 ms" in servers["llama-3-8b-l4"]["basis"]
    assert servers["llama-3-2-3b-t4"]["precision"] == "fp16"


def test_a_replica_is_priced_on_the_first_type_that_holds_it(families):
    servers = {s["model"]: s for s in to_json(families)["modelServers"]}
    # 4 GPUs per replica: not g6e.xlarge (1 GPU), the pool's g6e.12xlarge (4 GPUs, $10.49264/h).
    assert (servers["llama-3-70b-l40s"]["instanceType"], servers["llama-3-70b-l40s"]["usdPerHourPerReplica"]) == (
        "g6e.12xlarge",
        10.49264,
    )


def test_text_and_report_show_it_next_to_the_hourly_figure(families):
    text = render(families)
    assert "Model servers, $ per million output tokens at the predicted throughput" in text
    assert "llama-3-8b-l4: 1 x L4 (g6.xlarge) at bf16, $0.8050/h per replica" in text
    assert "per million output tokens; 2-4 replicas $1.61-$3.22/h" in text
    assert "- llama-3-2-3b-t4: 1 x T4 (g4dn.xlarge) at fp16" in markdown(families)


def test_other_kinds_have_no_model_servers():
    assert "modelServers" not in to_json(stack_cost("registry")[1])
