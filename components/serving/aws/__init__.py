"""Serving on EKS: VPC, cluster, node pools, add-ons, device plugins, model servers, the model converter."""
