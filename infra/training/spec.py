"""What a training stack declares on either cloud: the run's id, its whole nodes, the job they run, how long
the run may live, and the sizing intents of its Lustre file system. Each cloud's config (aws/, gcp/) adds the
hardware, the network and the capacity it buys."""

from __future__ import annotations

from typing import TypeVar

from pydantic import Field, field_validator

from infra.core.spec import Spec
from infra.training.job_env import (
    MAX_COMMAND_ARGS,
    MAX_COMMAND_BYTES,
    MAX_ENV_BYTES,
    MAX_ENV_VARS,
    command_problems,
    env_problems,
)
from infra.training.limits import DEFAULT_GRACE_MINUTES, MAX_GRACE_MINUTES

KEY = "mlinfra:training."  # config key prefix of every training finding
RUN_ID_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$"
EXPIRES_AT_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$"
EXPIRES_AT_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # strptime/strftime form of EXPIRES_AT_PATTERN
EXPIRES_AT_KEY = KEY + "lifecycle.expiresAt"  # fixed once per run by `python -m infra run`
MAX_TTL_HOURS = 336  # two weeks: longer runs checkpoint and start a new run


class FabricGateSpec(Spec):
    skip: bool = Field(
        False,
        description="Skip the fabric gate: the short all-reduce across every node that must reach the machine "
        "type's bus-bandwidth floor (infra/catalog/data/fabric.json) before the job starts. Skipped, a run whose "
        "collectives do not use the fabric runs (up to 10x slower) instead of failing at once; ask for it only "
        "to debug the gate itself.",
    )


class JobSpec(Spec):
    command: list[str] = Field(
        default_factory=lambda: ["/opt/job/train.py"],
        min_length=1,
        description="Training script and its arguments, as torchrun takes them on every node (torchrun starts "
        f"Python itself, so no leading `python`); at most {MAX_COMMAND_ARGS} arguments and {MAX_COMMAND_BYTES} "
        "bytes (UTF-8) in all.",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Extra environment variables for the job's processes (not the bootstrap's shell); PATH, "
        "LD_PRELOAD, MLINFRA_*, cloud credential settings and the collectives' transport (NCCL_NET, "
        f"NCCL_NET_PLUGIN, FI_PROVIDER) are refused (docs/training.md); at most {MAX_ENV_VARS} variables and "
        f"{MAX_ENV_BYTES} bytes (UTF-8) of KEY=value in all.",
    )
    torchrun_path: str | None = Field(
        None,
        pattern=r"^/[A-Za-z0-9._/-]+$",
        max_length=256,
        description="Absolute path of torchrun on the AMI; default: the path on the Deep Learning AMI in use "
        "(set it together with amiId when the AMI is your own).",
    )
    fabric_gate: FabricGateSpec = Field(
        default_factory=FabricGateSpec,
        description="The all-reduce every node runs before the job to prove the fabric (on by default).",
    )

    @field_validator("command")
    @classmethod
    def _command_renders_safely(cls, command: list[str]) -> list[str]:
        return _refuse(command_problems(command), command)

    @field_validator("env")
    @classmethod
    def _env_reaches_the_job_only(cls, env: dict[str, str]) -> dict[str, str]:
        return _refuse(env_problems(env), env)


class LifecycleSpec(Spec):
    ttl_hours: float = Field(
        24,
        gt=0,
        le=MAX_TTL_HOURS,
        allow_inf_nan=False,
        description=f"Hard maximum lifetime of the run, hours (at most {MAX_TTL_HOURS}); expiresAt = start + ttlHours. "
        "At expiresAt the run guard terminates the nodes, exports the checkpoints and deletes the file system.",
    )
    expires_at: str | None = Field(
        None,
        pattern=EXPIRES_AT_PATTERN,
        description="When the run's resources expire, ISO-8601 UTC (e.g. 2026-11-22T08:00:00Z). Fixed once when the "
        "run starts (`python -m infra run` writes it); required by `pulumi up`, provisional (now + ttlHours) "
        "in previews.",
    )
    teardown_on_completion: bool = Field(
        True,
        description="Terminate the nodes as soon as the job ends (the nodes power off, and the run guard terminates "
        "them on the completion marker). false keeps them for inspection until expiresAt.",
    )
    export_checkpoints: bool = Field(
        True,
        description="Export /fsx/checkpoints to the registry's checkpoints/<run-id>/ (continuously, and once more "
        "before the file system is deleted). false: checkpoints live only on Lustre and are lost with it.",
    )
    grace_period_minutes: int = Field(
        DEFAULT_GRACE_MINUTES,
        ge=0,
        le=MAX_GRACE_MINUTES,
        description="Minutes before expiresAt at which every node sends SIGTERM to the job, so it can save a last "
        "checkpoint and end normally before the run guard's hard stop.",
    )


MAX_INTENT_GIB = 1024**2  # 1 PiB: far past any run's data, and far inside the services' capacity fields


class LustreIntentSpec(Spec):
    """What the run needs from its Lustre file system; each cloud sizes its own service from these."""

    dataset_gib: float = Field(
        1200,
        ge=0,
        le=MAX_INTENT_GIB,
        allow_inf_nan=False,
        description="Size of the training data the run reads from datasets/, GiB.",
    )
    checkpoint_gib: float = Field(
        500, ge=0, le=MAX_INTENT_GIB, allow_inf_nan=False, description="Size of one full checkpoint, GiB."
    )
    checkpoint_write_seconds: float = Field(
        600,
        gt=0,
        le=86400,
        allow_inf_nan=False,
        description="Target time to write one checkpoint to Lustre, seconds.",
    )
    read_throughput_gbps: float = Field(
        10,
        ge=0,
        le=10000,
        allow_inf_nan=False,
        description="Target aggregate read throughput for data loading, Gbit/s (1 Gbit/s = 125 MB/s).",
    )


class RunSpec(Spec):
    """The run itself, the same on every cloud."""

    run_id: str = Field(
        pattern=RUN_ID_PATTERN, description="Run id: lowercase letters, digits and '-', up to 40 characters."
    )
    node_count: int = Field(ge=1, le=256, description="Whole nodes in the cluster, 1 to 256.")
    job: JobSpec = Field(default_factory=JobSpec, description="What the nodes run.")
    lifecycle: LifecycleSpec = Field(default_factory=LifecycleSpec, description="How long the run may live.")


_V = TypeVar("_V")


def _refuse(problems: list[str], value: _V) -> _V:
    if problems:
        raise ValueError("; ".join(problems))
    return value
