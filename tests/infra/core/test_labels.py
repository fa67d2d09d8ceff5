"""GCP names from mlinfra's own: labels from the contract tags, service account ids."""

from infra.core.labels import account_id, gcp_labels, label_value


def test_labels_keep_only_what_gcp_allows():
    assert gcp_labels({"mlinfra:run-id": "Run_1", "mlinfra:expires-at": "2026-11-22T08:00:00Z"}) == {
        "mlinfra-run-id": "run_1",
        "mlinfra-expires-at": "2026-11-22t08-00-00z",
    }
    assert len(label_value("x" * 80)) == 63


def test_account_ids_fit_gcp_bounds():
    assert account_id("train", "demo-llama-7b-gcp-001") == "train-demo-llama-7b-gcp-001"
    assert (
        account_id("model", "A-very-long-model-name-for-serving") == "model-a-very-long-model-name-f"
    )  # 30 characters
    assert account_id("m", "x") == "m-x-sa"  # padded to GCP's minimum of 6
