"""ComponentResources of the training stacks."""
