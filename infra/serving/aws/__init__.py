"""Serving on EKS: config, checks, node pools, cluster plans, IAM documents (pure)."""
