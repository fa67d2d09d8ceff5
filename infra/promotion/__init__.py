"""`promote` and `rollback`: from a finished run's checkpoint to served model versions, through the registry.

request (flags) -> registry (markers, versions, manifests, aliases over an ObjectStore) -> jobs (the
conversion Jobs as pure dicts) -> promote (orchestration over the ports) -> cli.
"""
