"""What a stack costs: priced from its offline preview and the catalogs' price tables (pure library;
`infra.tools.cost.cli` is the `python -m infra cost` verb)."""
