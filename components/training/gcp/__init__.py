"""Training on GCP: network, node account, nodes, Managed Lustre."""
