"""Training on AWS: EFA nodes, FSx for Lustre, the run guard (config, checks, plan, bootstrap)."""
