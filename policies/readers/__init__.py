"""Reading provider inputs as rules need them (pure): AWS, GCP, Kubernetes workloads, EventBridge patterns."""
