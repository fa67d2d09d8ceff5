"""The registry's mirror on GCP."""
