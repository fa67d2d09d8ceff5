"""Training on GCP: A3 nodes with GPU NICs, Managed Lustre (config, checks, plan, startup script)."""
