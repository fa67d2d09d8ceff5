"""Serving on GKE: network, cluster, node pools, add-ons, model servers."""
