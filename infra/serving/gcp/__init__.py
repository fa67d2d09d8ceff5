"""Serving on GKE: config, checks and node pool plans (pure)."""
