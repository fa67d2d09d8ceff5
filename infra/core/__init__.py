"""The shared kernel: errors and problems, config paths and sources, the Spec base, tags, names,
the project on disk. Imports nothing else of mlinfra."""
