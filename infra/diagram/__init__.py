"""Pictures of stacks (Graphviz): graph model, registry bridge, DOT output; `infra.diagram.cli` is the verb."""
