"""ComponentResources of the registry stacks."""
