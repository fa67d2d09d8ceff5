"""Tools over previews: the offline engine, the policy runner, cost, diagram, report, the stack file schema."""
