"""mlinfra pure library and CLI: config, catalog, naming, tags, offline engine."""
