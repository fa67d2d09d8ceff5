"""Per-launch decisions both clouds make the same way (pure): the launch generation that keys the nodes'
rendezvous, and the fabric gate the nodes run before the job.

A launch generation is named after what replaces every node when it changes: on AWS the EC2 Fleet's type, size,
zone and capacity type (its replace-on-changes properties), on GCP the machine type, node count and zone. Nodes of
a new generation meet in their own rendezvous directory on the run's Lustre file system, so the addresses of the
nodes they replaced never count. A later launch with the same shape reuses the name; its nodes then count only
registrations that are still being touched (infra/training/bootstrap.py), so nodes that are gone never count.
"""

from __future__ import annotations

import re
from typing import Literal

from infra.catalog.fabric import Cloud, fabric_floor, fabric_message_bytes
from infra.training.bootstrap import FabricGate


def launch_generation(machine_type: str, node_count: int, zone: str, capacity: str | None = None) -> str:
    """The generation id of a launch: e.g. `p4d.24xlarge-x4-us-east-1a-on-demand` (path-safe)."""
    parts = [machine_type, f"x{node_count}", zone, *([capacity] if capacity else [])]
    return re.sub(r"[^A-Za-z0-9._-]", "-", "-".join(parts))


def plan_fabric_gate(
    cloud: Cloud, machine_type: str, node_count: int, backend: Literal["nccl", "xla"], skip: bool
) -> FabricGate:
    """The gate for a run: the machine type's floor from the catalog; not run on one node (no collectives
    between nodes to prove) or when `job.fabricGate.skip` asks for it."""
    floor = fabric_floor(cloud, machine_type)
    skipped = None
    if skip:
        skipped = "job.fabricGate.skip is true"
    elif node_count < 2:
        skipped = "one node: no collectives between nodes to prove"
    return FabricGate(
        backend=backend,
        min_bus_bandwidth_gbps=floor.min_bus_bandwidth_gbps,
        message_bytes=fabric_message_bytes(),
        skipped=skipped,
    )
