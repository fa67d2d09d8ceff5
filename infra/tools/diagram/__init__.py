"""Pictures of stacks (Graphviz): graph model, registry bridge, DOT output; `infra.tools.diagram.cli` is the verb."""
