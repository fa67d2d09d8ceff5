"""Stack builders on GCP, one per kind."""
