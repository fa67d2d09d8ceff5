"""`python -m infra cost` on the GCP serving stack: GKE's fee priced, node pools from the GCP catalog,
prices without a source reported as unknown (the totals are then lower bounds)."""
import json

from infra.cli import main


def test_serving_gcp_demo_cost(capsys):
    assert main(["cost", "--stack", "serving-gcp-demo", "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)
    lines = {line["resource"]: line for line in cost["lines"]}
    assert lines["serving-gke-cluster"]["basis"] == "hourly"
    assert (lines["serving-gke-cluster"]["minUsdPerHour"], lines["serving-gke-cluster"]["maxUsdPerHour"]) == (0.1, 0.1)
    l4 = lines["pool-l4-pool"]
    assert l4["basis"] == "unknown"
    assert l4["what"] == ("3-9 x g2-standard-8 (1 x L4): unknown (no sourced price for its GPUs; its vCPU and memory "
                          "alone are $0.294/h) (1-3 per zone in 3 zones)")
    assert "e2-standard-4 is not in the GCP machine catalog" in lines["pool-system-pool"]["what"]
    assert lines["serving-net-nat"]["basis"] == "unknown"


def test_text_output_says_unknown_and_names_sources(capsys):
    assert main(["cost", "--stack", "serving-gcp-demo"]) == 0
    out = capsys.readouterr().out
    assert "us-central1 list prices" in out and "at least $0.1000" in out
    assert "gke.cluster: cloud.google.com/kubernetes-engine/pricing" in out
    assert "some prices are unknown: the totals are lower bounds" in out
