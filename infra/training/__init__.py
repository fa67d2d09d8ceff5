"""Training, whatever the cloud: the run's spec, lifetime and limits; aws/ and gcp/ hold each cloud's config,
meaning checks, plan and node bootstrap (pure, no pulumi resources)."""
