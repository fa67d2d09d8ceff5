"""`promote` and `rollback`: from a finished run's checkpoint to served model versions, through the registry.

request (flags) -> registry (markers, claims, versions, manifests, aliases over an ObjectStore) -> sizing
(Jobs that fit their pool) -> jobs (the conversion Jobs as pure dicts) -> promote (orchestration over the
ports) -> cli.
"""
