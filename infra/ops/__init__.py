"""Day-2 operations over one runtime (clock, output) and StackOps (Pulumi stacks): lifecycle/ and promotion/."""
