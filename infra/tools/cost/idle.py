"""The idle tail of a training run: what keeps billing after the job ends, as the lifecycle design allows
it. Every duration comes from infra/training/limits.py, so the cost follows the design when it changes."""

from __future__ import annotations

from infra.providers import tokens
from infra.tools.cost.compute import COMPUTE_TYPES
from infra.tools.cost.gcp import COMPUTE_INSTANCE as GCP_INSTANCE
from infra.tools.cost.model import IdleTail, IdleTerm, Line
from infra.training.limits import (
    COMPLETION_TO_TERMINATE_SECONDS,
    COMPLETION_TO_TERMINATE_WORST_SECONDS,
    EC2_SHUTDOWN_SECONDS,
    EXPORT_WAIT_SECONDS,
    GCP_GUARD_EXPIRY_TO_DELETE_SECONDS,
    HARD_CAP_OVERRUN_SECONDS,
    NODE_POWER_OFF_DELAY_SECONDS,
)


def idle_tail(
    lines: list[Line],
    hours: float,
    ttl_hours: float,
    teardown_on_completion: bool = True,
    export_checkpoints: bool = True,
) -> IdleTail:
    hourly = [line for line in lines if line.basis == "hourly"]
    # Instances and the root volumes they delete on termination stop together; the rest stays until teardown.
    node_types = (*COMPUTE_TYPES, GCP_INSTANCE)
    nodes_usd = sum(line.high for line in hourly if line.type in node_types)
    nodes = sum(line.nodes for line in lines if line.group == "compute")  # priced or not
    one_node_usd = nodes_usd / nodes if nodes else 0.0
    standing_usd = sum(line.high for line in hourly if line.type not in node_types)
    until_expiry = max(ttl_hours - hours, 0.0) * 3600
    gcp = any(line.type == GCP_INSTANCE for line in lines)
    stops = (
        (
            f"takes up to {EC2_SHUTDOWN_SECONDS} s to stop (the EC2_SHUTDOWN_SECONDS bound; Compute Engine stops "
            "billing its GPUs and vCPUs once it is stopped)"
        )
        if gcp
        else (
            f"takes up to {EC2_SHUTDOWN_SECONDS} s to terminate (EC2_SHUTDOWN_SECONDS; an upper bound, EC2 stops "
            "billing at shutting-down)"
        )
    )

    terms = []
    if teardown_on_completion:
        terms.append(
            IdleTerm(
                f"all {nodes} nodes, from the job's end to termination",
                COMPLETION_TO_TERMINATE_SECONDS,
                nodes_usd * COMPLETION_TO_TERMINATE_SECONDS / 3600,
                f"each node powers off {NODE_POWER_OFF_DELAY_SECONDS} s after its job exits "
                f"(NODE_POWER_OFF_DELAY_SECONDS) "
                f"and {stops}",
            )
        )
    else:
        seconds = until_expiry + HARD_CAP_OVERRUN_SECONDS
        terms.append(
            IdleTerm(
                f"all {nodes} nodes, kept until expires-at (teardownOnCompletion: false)",
                seconds,
                nodes_usd * seconds / 3600,
                f"ttlHours {ttl_hours:g} - {hours:g} h of run, plus the hard cap's overrun (HARD_CAP_OVERRUN_SECONDS)",
            )
        )
    export_seconds = EXPORT_WAIT_SECONDS if export_checkpoints else 0
    if export_checkpoints and nodes:
        terms.append(
            IdleTerm(
                "rank 0, waiting for the last checkpoints' export",
                EXPORT_WAIT_SECONDS,
                one_node_usd * EXPORT_WAIT_SECONDS / 3600,
                f"rank 0 waits at most {EXPORT_WAIT_SECONDS} s (EXPORT_WAIT_SECONDS) for Lustre to export the "
                f"checkpoints "
                "before it writes the completion marker; the other nodes have powered off",
            )
        )
    standing_seconds = export_seconds + COMPLETION_TO_TERMINATE_SECONDS
    terms.append(
        IdleTerm(
            "storage and network until teardown",
            standing_seconds,
            standing_usd * standing_seconds / 3600,
            "everything but the nodes (Lustre, network) bills until `teardown` removes it: that starts on the "
            "completion marker, "
            f"after the export wait ({export_seconds} s) and the nodes' termination "
            f"({COMPLETION_TO_TERMINATE_SECONDS} s); "
            "the destroy's own duration is not bounded by the design",
        )
    )
    unattended_usd, unattended_what = (
        standing_usd * until_expiry / 3600,
        "if nobody tears down, storage and network bill until expires-at",
    )
    guard_seconds: float = COMPLETION_TO_TERMINATE_WORST_SECONDS
    guard_what = "if a node's own power-off fails, the run guard stops it (worst case by design)"
    guarded = any(line.type == tokens.GCP_CLOUDFUNCTIONSV2_FUNCTION for line in lines)
    if gcp and guarded:
        seconds = until_expiry + GCP_GUARD_EXPIRY_TO_DELETE_SECONDS
        unattended_usd, unattended_what = (
            standing_usd * seconds / 3600,
            f"if nobody tears down, Managed Lustre bills until the run guard deletes it, at most "
            f"{GCP_GUARD_EXPIRY_TO_DELETE_SECONDS} s after expires-at (GCP_GUARD_EXPIRY_TO_DELETE_SECONDS, an export "
            "of at most EXPORT_WAIT_SECONDS); without nodes the networks cost nothing and the guard next to nothing",
        )
        guard_what = (
            "if a node's own power-off fails, the run guard deletes it on the completion marker (worst case by "
            "design: the marker's retry window, after which its minute ticks go on)"
        )
    elif gcp:  # no run guard: the file system and networks bill until someone runs the teardown
        unattended_usd, unattended_what = (
            standing_usd,
            (
                "if nobody tears down, storage and network bill until `teardown` or `reap --execute` runs, "
                "with no bound on GCP (no run guard), per hour"
            ),
        )
        guard_seconds = max(until_expiry, COMPLETION_TO_TERMINATE_WORST_SECONDS)
        guard_what = (
            "if a node's own power-off fails and nobody runs the teardown, it bills until Compute Engine "
            "deletes it at expires-at (no run guard; `run` tears down on the completion marker)"
        )
    return IdleTail(
        terms=tuple(terms),
        guard_path_usd=nodes_usd * guard_seconds / 3600,
        guard_path_what=guard_what,
        hard_cap_overrun_usd=nodes_usd * HARD_CAP_OVERRUN_SECONDS / 3600,
        unattended_usd=unattended_usd,
        unattended_what=unattended_what,
    )
