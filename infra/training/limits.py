"""The lifecycle's timing design, in one place: the node bootstrap, the run guard, the README and the
cost of the idle tail all read these numbers.

Paths that stop the spend after a run's job ends (every node runs the same bootstrap):
1. the node itself: on exit, rank 0 waits for Lustre to export the checkpoints (at most
   EXPORT_WAIT_SECONDS), writes the completion marker, and every node powers off
   NODE_POWER_OFF_DELAY_SECONDS later; the launch template turns power-off into termination;
2. the run guard: the marker's S3 event reaches the guard Lambda through EventBridge (seconds), which
   terminates every instance tagged with the run; failed deliveries are retried for at most
   GUARD_RETRY_WINDOW_SECONDS;
3. the hard cap: a one-time schedule at expires-at makes the guard terminate everything, export the
   checkpoints and delete the file system, whatever state the run is in; and every node schedules
   its own power-off at expires-at + NODE_BACKSTOP_SECONDS when it boots, in case the guard fails.
"""

from __future__ import annotations

NODE_POWER_OFF_DELAY_SECONDS = 60  # `shutdown -h +1` in the node bootstrap
EC2_SHUTDOWN_SECONDS = 60  # shutting-down to terminated, typical; billing stops at shutting-down
EXPORT_WAIT_SECONDS = 3600  # rank 0's bounded wait for the last checkpoint's export
GUARD_RETRY_WINDOW_SECONDS = 900  # EventBridge/Scheduler retry window for delivering to the guard
GUARD_RETRY_ATTEMPTS = 2  # Lambda asynchronous retries of a failed guard invocation
GUARD_EVENT_MAX_AGE_SECONDS = 21600  # Lambda keeps retrying a failed invocation this long (the maximum)
NODE_BACKSTOP_SECONDS = 300  # every node powers itself off this long after expires-at, whatever else happens
GUARD_TIMEOUT_SECONDS = 900  # guard Lambda timeout (the maximum); export polling re-invokes itself
EXPORT_POLL_SECONDS = 60  # how often the guard and teardown look at a running export
# How long `up` waits for the datasets association (and its metadata import of datasets/) to become AVAILABLE.
# The provider's default is 10 minutes (terraform-provider-aws internal/service/fsx/data_repository_association.go,
# read 2026-11-27), which a large datasets/ prefix outlasts: the association is then left CREATING, `up` fails and
# the file system bills on. The import lists objects, so its time grows with the number of objects, which no config
# field states (lustre.datasetGib is bytes); FSx publishes no import rate. A generous fixed bound instead: only a
# real account with the team's datasets/ confirms it (docs/training.md).
DATASETS_IMPORT_TIMEOUT = "2h"
DEFAULT_GRACE_MINUTES = 15  # SIGTERM to the job this long before expires-at, to save a checkpoint
MAX_GRACE_MINUTES = 120

# Worst case, by design, from the completion marker to the instances terminating: the node's own
# power-off when the node is healthy; the guard's retry window bounds it when it is not.
COMPLETION_TO_TERMINATE_SECONDS = NODE_POWER_OFF_DELAY_SECONDS + EC2_SHUTDOWN_SECONDS
COMPLETION_TO_TERMINATE_WORST_SECONDS = GUARD_RETRY_WINDOW_SECONDS + EC2_SHUTDOWN_SECONDS
# After expires-at, compute is terminating within this time even if the guard never runs: each node's
# own backstop shutdown (the guard usually stops it within seconds of expires-at).
HARD_CAP_OVERRUN_SECONDS = NODE_BACKSTOP_SECONDS + EC2_SHUTDOWN_SECONDS

# GCP (run_guard_gcp/, components/training/gcp/run_guard.py). Compute Engine deletes the nodes itself at
# expires-at (scheduling.terminationTime); the guard stops the rest. A Cloud Scheduler job publishes a tick every
# GCP_GUARD_TICK_SECONDS (cron's finest grain) and each tick takes one short step; the completion marker reaches
# the guard within seconds through the bucket's Pub/Sub notification.
GCP_GUARD_TICK_SECONDS = 60
GCP_NODE_DELETE_SECONDS = 900  # deleting an A3 VM takes minutes (the lifecycle's STOP_WAIT_SECONDS bound)
GCP_GUARD_EXPORT_MAX_SECONDS = 21600  # the guard gives up an export still running after this (keeping the data)
# From expires-at until the guard has asked Managed Lustre to delete the file system, when the export takes at most
# EXPORT_WAIT_SECONDS (the design's bound for the last checkpoints; a larger /checkpoints takes longer): a tick to
# start, the nodes' deletion, the export, a tick to see it done. Cloud Scheduler's own delivery delay and Managed
# Lustre's deletion time come on top and are not bounded by the design (docs/lifecycle.md).
GCP_GUARD_EXPIRY_TO_DELETE_SECONDS = (
    GCP_GUARD_TICK_SECONDS + GCP_NODE_DELETE_SECONDS + EXPORT_WAIT_SECONDS + GCP_GUARD_TICK_SECONDS
)
