"""The training node's bootstrap, shared by both clouds: one bash template, filled by a pure function.

Every node of a run runs the same script and learns its rank from a rendezvous on the shared Lustre file
system: check that the image has what the script relies on; mount Lustre at /fsx; check the fabric devices;
read the node's private IP from the metadata service, write it to /fsx/runs/<run-id>/hosts/<generation>/<ip>
and keep touching it, wait (bounded) for `node_count` live hosts of the same launch generation and sort them (a
node's rank is its index; rank 0 is torchrun's static-rendezvous master); prove the fabric with a short
all-reduce across every node (the fabric gate, `fabric_check.py`); run torchrun with the same static
rendezvous; on any exit, rank 0 waits (bounded) for the checkpoints' export and writes `runs/<run-id>/_SUCCESS`
or `_FAILED` (with the reason), unless the instance itself is being terminated; every node then powers off.
With an expiry, every node sends SIGTERM to the workers at expires-at minus the grace period, and at boot
schedules its own power-off a few minutes after expires-at.

Launch generations: a new fleet (another node count, type, zone or capacity) gets a new generation id, so its
nodes meet in their own directory and the addresses of the nodes they replaced never count; within one
generation a registration counts only while its node touches it (a later launch of the same shape does not
count nodes that died without leaving).

The cloud's parts (`Platform`: metadata service, fabric devices check, export, marker upload) are in
`aws/userdata.py` and `gcp/startup.py`. The template is filled in one pass and every value from the spec is
shell-quoted with `shlex.quote`; the training command is a bash array, so its arguments reach torchrun
verbatim. The job's `env` reaches torchrun's environment only (`env K=V torchrun ...`), never the script's
own shell, which pins its PATH; the keys and values a job may use are in `job_env.py`.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import ClassVar, Literal

from infra.core.naming import bucket_name_problem
from infra.registry.layout import runs_prefix
from infra.training.job_env import job_problems
from infra.training.limits import EXPORT_WAIT_SECONDS, NODE_BACKSTOP_SECONDS, NODE_POWER_OFF_DELAY_SECONDS

MOUNT_POINT = "/fsx"
# Directories under MOUNT_POINT that the file system links to the registry (data repository associations).
DATASETS_PATH = "/datasets"
CHECKPOINTS_PATH = "/checkpoints"
RDZV_PORT = 29500  # torchrun's static rendezvous on rank 0; the fabric gate uses the next port
HEARTBEAT_SECONDS = 10  # how often a node touches its registration
HOST_STALE_SECONDS = 120  # a registration untouched this long is a node that is gone
FABRIC_GATE_TIMEOUT_SECONDS = 900  # the whole gate, NCCL (or Neuron) initialisation across every node included
GENERATION_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")
_MARKER = re.compile(r"@@([A-Z][A-Z0-9_]*)@@")
_PROGRAM_END = "MLINFRA_FABRIC_CHECK"  # the here-document delimiter around the fabric gate's program


@dataclass(frozen=True)
class FabricGate:
    """The all-reduce every node runs before the job (`fabric_check.py` under torchrun), and its floor.
    `skipped` says why no gate runs (one node, or `job.fabricGate.skip`); the floor is then not used."""

    backend: Literal["nccl", "xla"]
    min_bus_bandwidth_gbps: float
    message_bytes: int
    timeout_seconds: int = FABRIC_GATE_TIMEOUT_SECONDS
    skipped: str | None = None

    def problems(self) -> list[str]:
        problems = []
        if self.backend not in ("nccl", "xla"):
            problems.append(f"fabric_gate.backend must be 'nccl' or 'xla' (got {self.backend!r})")
        floor = self.min_bus_bandwidth_gbps
        if isinstance(floor, bool) or not isinstance(floor, int | float) or not math.isfinite(floor) or floor < 0:
            problems.append(f"fabric_gate.min_bus_bandwidth_gbps must be a number >= 0 (got {floor!r})")
        for name in ("message_bytes", "timeout_seconds"):
            if not positive_int(getattr(self, name)):
                problems.append(f"fabric_gate.{name} must be a whole number >= 1 (got {getattr(self, name)!r})")
        return problems


@dataclass(frozen=True)
class Platform:
    """The cloud's parts of the bootstrap. Everything else - the expiry backstop, retries, the exit trap and
    marker JSON, the Lustre mount, the rendezvous and ranks, the job environment, torchrun and the grace
    period - is the one shared template, so both clouds run the same logic."""

    variables_a: str  # MLINFRA_* assignments after MLINFRA_GENERATION
    variables_b: str  # ... after MLINFRA_MARKER_URI
    export_functions: str  # defines wait_for_export: 0 once the checkpoints are in the registry
    marker_upload: str  # the pipe stage that stores the marker JSON (stdin) as ${MLINFRA_MARKER_URI}/_${status}
    devices_check: str  # checks the fabric devices after the mount
    private_ip: str  # sets MLINFRA_PRIVATE_IP from the metadata service
    metadata_name: str  # how messages name the metadata service
    power_off_means: str  # what powering off does to the node, for the script's comments
    power_off_on_exit_note: str

    @classmethod
    def from_shell(cls, package: str, filename: str, **texts: str) -> Platform:
        """The platform whose shell parts are the sections of `filename` in `package` (see `shell_sections`);
        `texts` are the parts that are words, not shell (metadata_name, power_off_means, ...)."""
        return cls(**shell_sections(package, filename), **texts)

    def slots(self) -> dict[str, str]:
        return {
            "PLATFORM_VARIABLES_A": self.variables_a,
            "PLATFORM_VARIABLES_B": self.variables_b,
            "EXPORT_FUNCTIONS": self.export_functions,
            "MARKER_UPLOAD": self.marker_upload,
            "DEVICES_CHECK": self.devices_check,
            "PRIVATE_IP": self.private_ip,
            "METADATA_NAME": self.metadata_name,
            "POWER_OFF_MEANS": self.power_off_means,
            "POWER_OFF_ON_EXIT_NOTE": self.power_off_on_exit_note,
        }


@dataclass(frozen=True, kw_only=True)
class RunBootstrap:
    """What every training node needs to join its run, on either cloud; each cloud's bootstrap adds its
    hardware, file system and where its markers go (`marker_bucket`)."""

    MARKER_BUCKET_FIELD: ClassVar[str]  # the subclass field that names the markers' bucket

    run_id: str
    node_count: int
    # The launch generation (what replaces every node when it changes); names the rendezvous directory.
    generation: str
    checkpoints_dir: str = MOUNT_POINT + CHECKPOINTS_PATH
    datasets_dir: str = MOUNT_POINT + DATASETS_PATH
    command: tuple[str, ...] = ()  # training script and its arguments, as torchrun takes them
    env: Mapping[str, str] = field(default_factory=dict, hash=False)
    rendezvous_timeout_seconds: int = 1800
    # How long rank 0 waits for /fsx/checkpoints to reach the registry before it reports the run.
    export_timeout_seconds: int = EXPORT_WAIT_SECONDS
    # Power the node off when the job ends (the cloud turns that into termination or a stop).
    power_off_on_exit: bool = True
    # Whether /fsx/checkpoints is exported; without it no export is awaited, and the marker's status
    # depends on the exit code alone.
    export_checkpoints: bool = True
    # Unix time at which every node sends SIGTERM to the job's workers (expires-at minus the grace
    # period), so they can save a last checkpoint before the run guard's hard stop; None: never.
    stop_at_epoch: int | None = None
    # Unix time of expires-at: every node schedules its own power-off NODE_BACKSTOP_SECONDS later at
    # boot, a hard cap that holds even if the run guard never runs; None: no backstop.
    expires_at_epoch: int | None = None
    torchrun: str = "torchrun"  # path of torchrun on the image
    # The all-reduce that proves the fabric before the job; None: no gate (the script says so).
    fabric_gate: FabricGate | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "command", tuple(self.command))
        object.__setattr__(self, "env", MappingProxyType(dict(sorted(dict(self.env).items()))))
        problems = self.problems()
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def marker_bucket(self) -> str:
        return str(getattr(self, self.MARKER_BUCKET_FIELD))

    @staticmethod
    def marker_bucket_problem(name: str) -> str | None:
        """Why the markers' bucket name is not one of this cloud's (S3's rules here; GCP's bootstrap: GCS's)."""
        return bucket_name_problem(name)

    @property
    def nproc_per_node(self) -> int:
        raise NotImplementedError

    def problems(self) -> list[str]:
        """What is wrong with the shared fields (S3 and GCS bucket names follow the same rules checked here)."""
        problems = []
        for name in ("node_count", "rendezvous_timeout_seconds", "export_timeout_seconds"):
            value = getattr(self, name)
            if not positive_int(value):
                problems.append(f"{name} must be a whole number >= 1 (got {value!r})")
        for name in ("stop_at_epoch", "expires_at_epoch"):
            value = getattr(self, name)
            if value is not None and not positive_int(value):
                problems.append(f"{name} must be a Unix time >= 1 (got {value!r})")
        try:
            runs_prefix(self.run_id)
        except ValueError as err:
            problems.append(f"run_id: {err}")
        bucket_problem = self.marker_bucket_problem(self.marker_bucket)
        if bucket_problem:
            problems.append(f"{self.MARKER_BUCKET_FIELD}: {bucket_problem}")
        if not self.torchrun:
            problems.append("torchrun must not be empty")
        if not isinstance(self.generation, str) or not GENERATION_PATTERN.fullmatch(self.generation):
            problems.append(
                f"generation must be 1-80 letters, digits, '.', '_' or '-', starting with a letter or digit "
                f"(got {self.generation!r})"
            )
        if self.fabric_gate is not None:
            problems += self.fabric_gate.problems()
        for name in ("checkpoints_dir", "datasets_dir"):
            path = getattr(self, name)
            if not path.startswith(f"{MOUNT_POINT}/") or "/../" in f"{path}/":
                problems.append(f"{name} must be a directory under {MOUNT_POINT}/ (got {path!r})")
        problems += job_problems(self.command, dict(self.env))
        return problems


def positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def common_values(spec: RunBootstrap, lustre_source: str, marker_uri: str) -> dict[str, str]:
    """Values of the shared part of the script, from the shared fields of either cloud's bootstrap."""
    q = shlex.quote
    runs = runs_prefix(spec.run_id)
    return {
        "RUN_ID": q(spec.run_id),
        "RUN_ID_JSON": q(json.dumps(spec.run_id)),
        "NODE_COUNT": str(spec.node_count),
        "NPROC": str(spec.nproc_per_node),
        "LUSTRE_SOURCE": q(lustre_source),
        "MOUNT_POINT": q(MOUNT_POINT),
        "CHECKPOINTS_DIR": q(spec.checkpoints_dir),
        "DATASETS_DIR": q(spec.datasets_dir),
        "RUN_DIR": q(f"{MOUNT_POINT}/{runs.rstrip('/')}"),
        "GENERATION": q(spec.generation),
        "HEARTBEAT_SECONDS": str(HEARTBEAT_SECONDS),
        "HOST_STALE_SECONDS": str(HOST_STALE_SECONDS),
        "MARKER_URI": q(marker_uri),
        "TIMEOUT": str(spec.rendezvous_timeout_seconds),
        "EXPORT_TIMEOUT": str(spec.export_timeout_seconds),
        "POWER_OFF": "1" if spec.power_off_on_exit else "0",
        "POWER_OFF_MINUTES": str(NODE_POWER_OFF_DELAY_SECONDS // 60),
        "EXPORT": "1" if spec.export_checkpoints else "0",
        "STOP_AT": str(spec.stop_at_epoch or 0),
        "EXPIRES_AT": str(spec.expires_at_epoch or 0),
        "BACKSTOP_SECONDS": str(NODE_BACKSTOP_SECONDS),
        "RDZV_PORT": str(RDZV_PORT),
        "JOB_ENV": " ".join(q(f"{k}={v}") for k, v in spec.env.items()),
        "TORCHRUN": q(spec.torchrun),
        "COMMAND": " ".join(q(arg) for arg in spec.command),
        "FABRIC_GATE": fabric_gate_section(spec.fabric_gate, spec.node_count),
    }


def fabric_gate_section(gate: FabricGate | None, node_count: int) -> str:
    """The script's fabric gate (infra/training/fabric_gate.sh, filled in one pass): `fabric_check.py` written to
    the node and run by torchrun with the job's static rendezvous; a failure, or a figure below the floor, ends
    the run with that figure. A comment instead when no gate runs, saying why."""
    if gate is None:
        return "# ---- the fabric gate: none configured for this bootstrap ----\n"
    if gate.skipped:
        note = f"fabric gate not run: {gate.skipped}"
        return f"# ---- the fabric gate: not run ({gate.skipped}) ----\nlog {shlex.quote(note)}\n"
    if node_count < 2:
        return "# ---- the fabric gate: not run (one node: no collectives between nodes to prove) ----\n"
    values = {
        "GATE_PROGRAM": fabric_check_program(),
        "GATE_BACKEND": gate.backend,
        "GATE_BYTES": str(gate.message_bytes),
        "GATE_FLOOR": f"{gate.min_bus_bandwidth_gbps:g}",
        "GATE_TIMEOUT": str(gate.timeout_seconds),
        "GATE_COLLECTIVE_TIMEOUT": str(max(gate.timeout_seconds - 60, 60)),
    }
    text = _shell_file("fabric_gate.sh").split("\n", 2)[2]  # its first two lines describe the file
    return _MARKER.sub(lambda m: values[m.group(1)], text)


@cache
def fabric_check_program() -> str:
    """The fabric gate's program, infra/training/fabric_check.py, as the node writes it."""
    program = resources.files("infra.training").joinpath("fabric_check.py").read_text(encoding="utf-8")
    if _PROGRAM_END in program.splitlines() or "@@" in program:
        raise ValueError(f"fabric_check.py must not contain a line {_PROGRAM_END!r} nor '@@'")
    return program if program.endswith("\n") else program + "\n"


def render_script(platform: Platform, values: Mapping[str, str]) -> str:
    """The shared script with `platform`'s parts, then `values`, filled into its @@NAME@@ markers.

    Each step is one pass over the text: a filled-in value is never scanned for markers again, so no value
    (a job's env or command included) can splice another value, or a part of the script, into itself."""
    slots = platform.slots()
    script = _MARKER.sub(lambda m: slots.get(m.group(1), m.group(0)), template())
    unknown = sorted({m.group(1) for m in _MARKER.finditer(script)} - set(values))
    if unknown:
        raise ValueError(f"the bootstrap template has markers with no value: {', '.join(unknown)}")
    return _MARKER.sub(lambda m: values[m.group(1)], script)


@cache
def template() -> str:
    """The shared script, infra/training/bootstrap.sh, with its @@SLOT@@ and @@VALUE@@ markers."""
    return _shell_file("bootstrap.sh")


@cache
def _shell_file(name: str) -> str:
    return resources.files("infra.training").joinpath(name).read_text(encoding="utf-8")


def shell_sections(package: str, filename: str) -> dict[str, str]:
    """`# ==== name ====` marker lines split a shell file into named sections (text up to the next marker;
    lines before the first marker describe the file)."""
    sections: dict[str, str] = {}
    current = None
    for line in resources.files(package).joinpath(filename).read_text(encoding="utf-8").splitlines(keepends=True):
        marker = re.fullmatch(r"# ==== (\w+) ====\n", line)
        if marker:
            current = marker.group(1)
            sections[current] = ""
        elif current is not None:
            sections[current] += line
    return sections
