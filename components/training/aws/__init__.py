"""Training on AWS: network, security groups, node role, nodes, FSx for Lustre, run guard."""
