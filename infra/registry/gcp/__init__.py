"""The registry's mirror on GCP: config, checks and the transfer's pure decisions."""
