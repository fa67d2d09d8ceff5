"""`python -m infra cost` on the GCP stacks: GKE's fee priced, node pools and training nodes from the GCP catalog,
Cloud NAT per VM it serves, prices without a source reported as unknown (the totals are then lower bounds)."""

import json

import pytest

from infra.cli import main


def test_serving_gcp_demo_cost(capsys):
    assert main(["cost", "--stack", "serving-gcp-demo", "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)
    lines = {line["resource"]: line for line in cost["lines"]}
    assert lines["serving-gke-cluster"]["basis"] == "hourly"
    assert (lines["serving-gke-cluster"]["minUsdPerHour"], lines["serving-gke-cluster"]["maxUsdPerHour"]) == (0.1, 0.1)
    l4 = lines["pool-l4-pool"]
    assert l4["basis"] == "hourly" and l4["what"] == "1-3 x g2-standard-8 at $0.854/h (in total over 3 zones)"
    assert (l4["minUsdPerHour"], l4["maxUsdPerHour"]) == (pytest.approx(0.853624), pytest.approx(3 * 0.853624))
    system = lines["pool-system-pool"]
    assert system["basis"] == "hourly" and system["what"] == "2-6 x e2-standard-4 at $0.134/h (in total over 3 zones)"
    assert (system["minUsdPerHour"], system["maxUsdPerHour"]) == (
        pytest.approx(2 * 0.13402),
        pytest.approx(6 * 0.13402),
    )
    # Cloud NAT bills per VM it serves: the system pool's 2-6 nodes and the L4 pool's 1-3, plus one address.
    nat = lines["serving-net-nat"]
    assert nat["basis"] == "hourly" and "for 3-9 VMs" in nat["what"]
    assert (nat["minUsdPerHour"], nat["maxUsdPerHour"]) == (
        pytest.approx(3 * 0.0014 + 0.005),
        pytest.approx(9 * 0.0014 + 0.005),
    )
    # The front door's passthrough load balancer: one forwarding rule an hour, its data processed as usage.
    door = lines["front-door-envoyproxy"]
    assert door["basis"] == "hourly" and door["minUsdPerHour"] == door["maxUsdPerHour"] == pytest.approx(0.025)
    assert "forwarding rule" in door["what"] and door["unitPrices"] == ["$0.008 per GiB processed"]
    assert not [line for line in cost["lines"] if line["basis"] == "unknown"]


def test_text_output_names_sources(capsys):
    assert main(["cost", "--stack", "serving-gcp-demo"]) == 0
    out = capsys.readouterr().out
    assert "us-central1 list prices" in out and "Hourly: $1.26 at min to $3.51 at max" in out
    assert "Cyclenerd/google-cloud-pricing-cost-calculator" in out and "(as of 2025-03-06)" in out
    assert "gke.cluster: cloud.google.com/kubernetes-engine/pricing" in out
    assert "gcp.cloudNat.vm: cloud.google.com/nat/pricing" in out
    assert "unknown" not in out


def test_cloud_nat_past_32_vms_bills_the_capped_gateway_rate(capsys):
    args = ["cost", "--stack", "serving-gcp-demo", "--json", "-c", "mlinfra:serving.nodePools.l4.maxNodes=40"]
    assert main(args) == 0
    nat = next(line for line in json.loads(capsys.readouterr().out)["lines"] if line["resource"] == "serving-net-nat")
    assert nat["maxUsdPerHour"] == pytest.approx(0.044 + 0.005)


def test_training_gcp_demo_cost_prices_the_a3_nodes_and_their_idle_tail(capsys):
    assert main(["cost", "--stack", "training-gcp-demo", "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)
    nodes = [line for line in cost["lines"] if line["type"] == "gcp:compute/instance:Instance"]
    assert [line["maxUsdPerHour"] for line in nodes] == [88.49, 88.49]
    lustre = next(line for line in cost["lines"] if line["type"] == "gcp:lustre/instance:Instance")
    assert lustre["basis"] == "unknown" and "9000 GiB at 1000 MB/s/TiB" in lustre["what"]  # only 125 is sourced
    idle = cost["run"]["idleTail"]
    # Both nodes bill from the job's end until they are stopped (120 s), then rank 0 alone for the export wait.
    assert [term["usd"] for term in idle["terms"][:2]] == [
        pytest.approx(2 * 88.49 * 120 / 3600, abs=0.01),
        pytest.approx(88.49, abs=0.01),
    ]


AT_125 = [
    "cost",
    "--stack",
    "training-gcp-demo",
    "--json",
    "-c",
    "mlinfra:training.lustre.perUnitStorageThroughput=125",
]


def test_managed_lustre_at_125_mb_s_per_tib_is_priced_per_gib_month(capsys):
    assert main(AT_125) == 0
    cost = json.loads(capsys.readouterr().out)
    lustre = next(line for line in cost["lines"] if line["type"] == "gcp:lustre/instance:Instance")
    capacity = int(lustre["what"].split()[2])
    assert lustre["basis"] == "hourly" and lustre["maxUsdPerHour"] == pytest.approx(capacity * 0.145 / 730, abs=0.01)


def test_the_run_guard_bounds_the_gcp_idle_tail_and_prices_itself(capsys):
    """With a priced Lustre tier, nobody tearing down costs Lustre until the guard deletes it: at most
    GCP_GUARD_EXPIRY_TO_DELETE_SECONDS after expires-at (before the guard: the same per hour, without a bound)."""
    from infra.training.limits import GCP_GUARD_EXPIRY_TO_DELETE_SECONDS

    assert main(AT_125) == 0
    cost = json.loads(capsys.readouterr().out)
    standing = sum(
        line["maxUsdPerHour"] for line in cost["lines"] if line["basis"] == "hourly" and line["group"] != "compute"
    )
    idle = cost["run"]["idleTail"]
    assert idle["unattendedUntilExpiryUsd"] == pytest.approx(
        standing * GCP_GUARD_EXPIRY_TO_DELETE_SECONDS / 3600, abs=0.01
    )
    assert "until the run guard deletes it, at most 4620 s after expires-at" in idle["unattendedWhat"]
    guard = {line["resource"].rsplit("-", 1)[-1]: line for line in cost["lines"] if line["group"] == "guard"}
    assert guard["tick"]["maxUsdPerHour"] == pytest.approx(0.10 / (31 * 24), abs=1e-6)  # $0.10 per job per 31 days
    # one instance at most (0.167 vCPU, 256 MiB) busy all hour, plus 60 requests
    assert guard["function"]["maxUsdPerHour"] == pytest.approx(
        60 * 4e-7 + 3600 * (0.167 * 2.4e-5 + 0.25 * 2.5e-6), abs=1e-6
    )
    assert guard["topic"]["basis"] == guard["code"]["basis"] == "usage"
