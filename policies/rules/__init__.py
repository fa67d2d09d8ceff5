"""One rule per module: NAME, DESCRIPTION, the resource TYPES it reads and a pure `check` function."""
