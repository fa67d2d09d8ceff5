"""Pulumi ComponentResources, one per file. Components only wire; decisions live in infra/."""
