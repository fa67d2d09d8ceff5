"""The Cloud Run function's entry point (deployed as main.py at the source root, as Google's Python runtime
requires; entry point `guard`): one CloudEvent per Pub/Sub message on the run's guard topic."""

import functions_framework

from run_guard_gcp.handler import handle_event


@functions_framework.cloud_event
def guard(cloud_event):
    handle_event(cloud_event.data)
