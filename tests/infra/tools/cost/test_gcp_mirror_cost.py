"""`python -m infra cost` on the registry's mirror on GCP: the KMS key version per month, storage and egress
per GB usage-based, with their sources."""

import json

from infra.cli import main


def test_mirror_cost_lines(capsys):
    assert main(["cost", "--stack", "registry-gcp-mirror", "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)
    lines = {line["resource"]: line for line in cost["lines"]}
    key = lines["mirror-key"]
    assert key["basis"] == "hourly" and abs(key["maxUsdPerHour"] * 730 - 0.06) < 1e-3  # rounded in the JSON
    assert lines["mirror-bucket"]["basis"] == "usage"
    assert "$0.02 per GB-month" in lines["mirror-bucket"]["unitPrices"]
    transfer = lines["mirror-transfer"]
    assert transfer["basis"] == "usage"
    assert transfer["unitPrices"][:2] == ["$0.09 per GB out to the internet", "$0 per GB transferred"]
    assert not [line for line in cost["lines"] if line["basis"] == "unknown"]


def test_mirror_cost_text_names_sources_and_the_per_copy_note(capsys):
    assert main(["cost", "--stack", "registry-gcp-mirror"]) == 0
    out = capsys.readouterr().out
    assert "Monthly (730 h): $0.0600" in out
    assert "gcp.storageTransfer.agentless: cloud.google.com/storage-transfer/pricing" in out
    assert "each GB copied costs $0.09 of S3 egress to the internet once" in out
    assert "S3 Standard, first 50 TB" not in out.split("Notes:")[1]  # the AWS registry's note is not shown here
