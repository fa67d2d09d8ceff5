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
    long = account_id("model", "A-very-long-model-name-for-serving")
    assert len(long) == 30 and long.startswith("model-a-very-long-model-")
    assert account_id("m", "x") == "m-x-sa"  # padded to GCP's minimum of 6


def test_long_names_sharing_their_start_get_different_accounts():
    first, second = (account_id("guard", f"demo-llama-7b-gcp-001-{end}") for end in ("aaaaaaaaaa", "aaaaaaaaab"))
    assert first != second and len(first) == len(second) == 30
    assert first == account_id("guard", "demo-llama-7b-gcp-001-aaaaaaaaaa")  # stable run to run
    assert account_id("gke-nodes", "mlinfra-serving-gcp-demo", hashed=False) == "gke-nodes-mlinfra-serving-gcp"
