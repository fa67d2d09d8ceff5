"""The lifecycle of a training run: run, teardown, reap, audit, and the facts the run guard is built on.

Everything that talks to the cloud or to Pulumi goes through the two ports in `ports.py`, so the
orchestration is tested against recording stand-ins and the adapters by what they issue.
"""
