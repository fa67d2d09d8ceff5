"""The model registry: its prefix layout and access documents; aws/ the bucket's config, gcp/ its mirror."""
