"""What a serving stack declares on either cloud: the models it serves, how they scale, and who reaches the
Kubernetes API. Each cloud's config (aws/, gcp/) narrows the accelerator to its own pools."""

from __future__ import annotations

import functools
import re
from importlib.resources import files
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from infra.catalog.accelerators import precision_names
from infra.core.network import covers_internet, ipv4_cidr, public_reach
from infra.core.spec import Spec
from infra.registry.layout import RESERVED_VERSIONS, VERSION_PATTERN
from infra.serving import images, schedule
from infra.serving.families import FAMILIES
from infra.serving.variants import VARIANTS

MODEL_NAME_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$"  # a DNS label with room for suffixes


# Variants a model server of mlinfra serves (facts in infra/serving/variants.py; a test keeps both in step).
Variant = Literal["neuron", "cuda", "cuda-fp8", "cuda-int4", "cuda-int8", "neuron-int8"]
# The precisions (infra/catalog/data/accelerators.json) each variant's artefact is served at: the fit check
# and the sizing key on precision.
VARIANT_PRECISIONS: dict[str, tuple[str, ...]] = {name: v.precisions for name, v in VARIANTS.items()}


# The Kubernetes API is never open to the whole internet: the pack's mandatory eks-api-endpoint-restricted
# refuses it, so the config does too (config and pack agree on every boundary).
PUBLIC_INTERNET_REFUSED = (
    "the Kubernetes API is never open to the whole internet (mandatory policy eks-api-endpoint-restricted); "
    "use access: restricted and list the networks that administer the cluster in publicAccessCidrs"
)


class EndpointSpec(Spec):
    access: Literal["private", "restricted"] = Field(
        "private",
        description="Who reaches the Kubernetes API: 'private' (inside the VPC only) or 'restricted' (also "
        "from publicAccessCidrs). Never the whole internet.",
    )
    public_access_cidrs: list[str] = Field(
        default_factory=list,
        description="IPv4 CIDRs allowed to reach the public endpoint with access 'restricted' "
        "(e.g. the CI runners' and VPN's egress); lists that cover the whole internet are refused.",
    )

    @field_validator("access", mode="before")
    @classmethod
    def _never_the_whole_internet(cls, value: object) -> object:
        if value == "public-internet":
            raise ValueError(PUBLIC_INTERNET_REFUSED)
        return value

    @field_validator("public_access_cidrs")
    @classmethod
    def _valid_cidrs(cls, values: list[str]) -> list[str]:
        # Whether the list fits `access` is a meaning check (serving_checks), naming this field.
        for value in values:
            ipv4_cidr(value)
        if covers_internet(values):
            raise ValueError(
                f"{', '.join(values)} admit {public_reach(values)}, the internet at large: {PUBLIC_INTERNET_REFUSED}"
            )
        return values


class AutoscalingSpec(Spec):
    queue_depth_target: int | None = Field(
        None,
        ge=1,
        le=1000,
        description="Waiting requests per replica (vllm:num_requests_waiting) above which replicas are added. "
        "Default: derived from the model's slo and the performance model (the queue a replica works off within the "
        "TTFT target), or 4 without an slo; a value set here is kept.",
    )
    kv_cache_target: float = Field(
        0.8,
        gt=0,
        le=1,
        description="Average KV-cache use (vllm:kv_cache_usage_perc, or gpu_cache_usage_perc before vLLM 0.10; "
        "0-1) above which replicas are added. On inf2, whose batch is compiled in, the share of the batch's "
        "sequence slots in use (vllm:num_requests_running / maxNumSeqs).",
    )
    scale_down_stabilization_seconds: int = Field(
        300,
        ge=0,
        le=3600,
        description="Seconds the load must stay low before replicas are removed (HPA scale-down stabilisation window).",
    )
    polling_interval_seconds: int = Field(15, ge=5, le=300, description="How often KEDA queries Prometheus, seconds.")


# The artefact variant a pool's server loads when a model names none.
DEFAULT_VARIANT = {name: f.default_variant for name, f in FAMILIES.items()}


# An OCI image reference as the distribution grammar has it, with a tag or a digest (never "latest" implied):
# no spaces, newlines or shell characters can reach a pod spec.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
# A registry host only when it looks like one (a dot, a port, or localhost), as docker decides; else a path.
_DOMAIN = r"(?:(?:localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)(?::[0-9]+)?/|[A-Za-z0-9-]+:[0-9]+/)"
IMAGE_REFERENCE = (
    rf"^{_DOMAIN}?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}(?:@sha256:[a-f0-9]{64})?|@sha256:[a-f0-9]{64})$"
)


def pinned_image(image: str) -> str:
    """`image` when it is an image reference pinned by a tag or a digest, else ValueError saying what is allowed."""
    if not re.fullmatch(IMAGE_REFERENCE, image):
        raise ValueError(
            "must be an image reference pinned by a tag or a digest: [registry/]path:tag or "
            "[registry/]path@sha256:<64 hex digits>, lowercase path, no spaces or other characters"
        )
    tag, digest = images.pin(image)
    if tag == "latest" and digest is None:
        # `latest` moves: what runs would not be what was reviewed (mandatory policy charts-and-images-pinned).
        raise ValueError(f"{image!r} is :latest, which moves; pin a release tag or a digest")
    return image


# The longest latency target the commands take (`size`, `simulate`): an hour.
MAX_SLO_MS = 3_600_000.0


class SloSpec(Spec):
    ttft_p95_ms: float = Field(gt=0, le=600_000, description="p95 time to first token the model must meet, ms.")
    tpot_p95_ms: float = Field(gt=0, le=60_000, description="p95 time per output token the model must meet, ms.")
    prompt_tokens_p95: int | None = Field(
        None,
        ge=1,
        le=1048576,
        description="The p95 prompt length the TTFT target is for. Default: half of maxModelLen, at most 2048.",
    )


# The longest the front door may hold a request while a model's pool is empty: Envoy AI Gateway v1.1.0 gives the
# endpoint picker 300 s to answer a request's body (internal/extensionserver/inferencepool.go, messageTimeout), and
# the picker holds it in its flow-control queue meanwhile.
HOLD_CAP_SECONDS = 300
# What a client waits by default before it gives up: the OpenAI SDKs' default request timeout, 600 s (openai-python
# and openai-node, DEFAULT_TIMEOUT). docs/serving.md tells clients of a model that scales to zero to allow this.
DEFAULT_CLIENT_TIMEOUT_SECONDS = 600


class ScaleToZeroSpec(Spec):
    hold_seconds: int = Field(
        240,
        ge=1,
        le=HOLD_CAP_SECONDS,
        description="While no replica serves, the front door holds each request up to this long (the endpoint "
        f"picker's flow-control queue), then answers 503 with Retry-After. At most {HOLD_CAP_SECONDS} (the gateway's "
        "limit) and at most clientTimeoutSeconds; at least the start-up on a node that holds the image.",
    )
    max_held_requests: int = Field(
        200, ge=1, le=100000, description="Requests held at once while the pool is empty; more are answered 429."
    )
    cooldown_seconds: int | None = Field(
        None,
        ge=60,
        le=86400,
        description="Seconds without a request before the last replica goes (KEDA cooldownPeriod). Default: the "
        "replica's start-up budget from zero, rounded up to the minute (never shorter: a pool that goes sooner "
        "than it comes back flaps).",
    )
    client_timeout_seconds: int = Field(
        DEFAULT_CLIENT_TIMEOUT_SECONDS,
        ge=10,
        le=3600,
        description="How long the model's clients wait for a response (document it to them; the OpenAI SDKs' "
        "default is 600): the hold must end before it.",
    )

    @model_validator(mode="after")
    def _hold_ends_before_the_client(self) -> ScaleToZeroSpec:
        if self.hold_seconds > self.client_timeout_seconds:
            raise ValueError(
                f"holdSeconds {self.hold_seconds} is longer than clientTimeoutSeconds {self.client_timeout_seconds}: "
                "a held request would outlast its client"
            )
        return self


Day = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
_CLOCK = r"^(?:[01][0-9]|2[0-3]):[0-5][0-9]$|^24:00$"


class ScheduleWindowSpec(Spec):
    days: list[Day] = Field(min_length=1, max_length=7, description="Days the window applies to (mon ... sun).")
    start: str = Field(alias="from", pattern=_CLOCK, description="Start, HH:MM in the schedule's time zone.")
    end: str = Field(alias="to", pattern=_CLOCK, description="End, HH:MM (24:00 for midnight), after `from`.")
    min_replicas: int = Field(ge=0, le=100, description="Replicas kept serving in the window (0: scale to zero).")

    @field_validator("days")
    @classmethod
    def _each_day_once(cls, days: list[str]) -> list[str]:
        if len(set(days)) != len(days):
            raise ValueError(f"{days}: each day once")
        return days


class ScheduleSpec(Spec):
    timezone: str = Field(min_length=1, max_length=64, description="IANA time zone of the windows, e.g. Europe/Berlin.")
    windows: list[ScheduleWindowSpec] = Field(
        min_length=1,
        max_length=50,
        description="Minimum replicas by day and time; together the windows cover the week once, with no overlap "
        "and no gap. Replicas are started ahead of a window by the replica's start-up budget.",
    )

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        if value not in zone_names():
            raise ValueError(f"{value!r} is not an IANA time zone (e.g. Europe/Berlin, America/New_York, UTC)")
        return value

    @model_validator(mode="after")
    def _tiles_the_week(self) -> ScheduleSpec:
        problems = schedule.tiling_problems([(w.days, w.start, w.end) for w in self.windows])
        if problems:
            raise ValueError("; ".join(f"windows[{index}]: {why}" for index, why in problems))
        return self

    def as_tuples(self) -> list[tuple[list[str], str, str, int]]:
        return [(list(w.days), w.start, w.end, w.min_replicas) for w in self.windows]


@functools.cache
def zone_names() -> frozenset[str]:
    """The IANA zones of the pinned tzdata package (the project's dependency, the same on every machine: the system's
    own database is not read)."""
    return frozenset(files("tzdata").joinpath("zones").read_text(encoding="utf-8").split())


class ModelSpec(Spec):
    name: str = Field(
        pattern=MODEL_NAME_PATTERN, description="Model name in the registry (models/<name>/...); a DNS label."
    )
    version: str = Field(
        pattern=f"^{VERSION_PATTERN}$",
        description=f"Released version (models/<name>/<version>/); not {', '.join(RESERVED_VERSIONS)}.",
    )

    @field_validator("image")
    @classmethod
    def _pinned_image(cls, image: str) -> str:
        return pinned_image(image)

    @field_validator("version")
    @classmethod
    def _not_reserved(cls, version: str) -> str:
        if version in RESERVED_VERSIONS:
            raise ValueError(f"{version!r} is reserved: models/<name>/{version}/ is not a version")
        return version

    alias: str | None = Field(
        None,
        pattern=r"^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$",
        description="Registry alias this entry follows (models/<name>/aliases/<alias>.json): `python -m infra "
        "promote`/`rollback` write the alias's version into `version` and run `up`. Unset: a fixed version.",
    )
    accelerator: Literal["inf2", "g5", "g4dn", "g6", "g6e", "l4", "a100"] = Field(
        description="Node pool that serves it (each cloud's config narrows this to its own pools)."
    )
    variant: Variant | None = Field(
        None,
        description="Artefact variant to load (models/<name>/<version>/<variant>/): neuron or cuda (bf16), "
        "cuda-fp8 (W8A8 FP8: L4, L40S), cuda-int4 (W4A16 int4 in groups of 128: A10G, L4, L40S, A100), cuda-int8 "
        "(W8A8 INT8: T4 and later) or neuron-int8 (int8 weight-only on Inferentia2); the pool's devices must "
        "run it. Default: neuron on inf2, cuda on the GPU pools.",
    )
    image: str = Field(
        json_schema_extra={"pattern": IMAGE_REFERENCE},
        description="Model server image, pinned by tag or digest ([registry/]path:tag or ...@sha256:<digest>): a "
        "vLLM image with the Neuron backend on inf2, a vLLM CUDA image on g5.",
    )
    min_replicas: int = Field(
        2,
        ge=0,
        le=100,
        description="Replicas kept running. 2 by default, so a node's loss, a Spot reclaim or a drain never "
        "leaves the model unserved; set 1 by name to accept that, or 0 with scaleToZero. With a schedule, the "
        "schedule's smallest minimum (leave this unset).",
    )
    scale_to_zero: ScaleToZeroSpec | None = Field(
        None,
        description="Let the model's replicas go to zero without traffic (minReplicas 0, or a schedule window at "
        "0): the front door holds requests while none serves and they wake the pool. Needs the stack's gateway.",
    )
    schedule: ScheduleSpec | None = Field(
        None,
        description="Minimum replicas by time of week (e.g. 0 at night, 2 in office hours), in place of minReplicas.",
    )
    max_replicas: int = Field(4, ge=1, le=100, description="Upper bound of the autoscaler.")
    accelerators_per_replica: int = Field(
        1,
        ge=1,
        le=16,
        description="Neuron devices (inf2) or GPUs per replica; also the tensor-parallel degree (two shards per "
        "Inferentia2 device, one per NeuronCore).",
    )
    cpu: int = Field(2, ge=1, le=190, description="CPU cores requested per replica.")
    memory_gib: int = Field(10, ge=1, le=2000, description="Memory requested per replica, GiB.")
    max_model_len: int = Field(4096, ge=128, le=1048576, description="Longest context served (vLLM --max-model-len).")
    max_num_seqs: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="Sequences one replica serves at once (vLLM --max-num-seqs); on inf2 also the batch size "
        "the model is compiled for. Default: 8 on inf2, 256 on GPUs.",
    )
    max_request_seconds: int = Field(
        600,
        ge=10,
        le=3600,
        description="Longest a request may run; a stopping replica finishes its requests for up to this long "
        "(its termination grace period).",
    )
    autoscaling: AutoscalingSpec = Field(default_factory=AutoscalingSpec, description="Scaling on inference signals.")
    slo: SloSpec | None = Field(
        None,
        description="Latency targets: the config check refuses a device, precision and shape the performance model "
        "says cannot meet them even unloaded, and the autoscaler's queue-depth target is derived from them.",
    )
    architecture_config: str | None = Field(
        None,
        alias="modelConfig",  # `model_config` is pydantic's own attribute
        min_length=1,
        description="The model's Hugging Face config.json (a path relative to the project root, e.g. "
        "stacks/models/llama-3-8b/config.json): its layers, heads, KV heads and sizes give the memory fit "
        "(weights + KV cache for maxModelLen + overhead against the devices). The mandatory policy "
        "model-servers-fit-their-devices needs it.",
    )
    precision: str | None = Field(
        None,
        description="Number formats the model is served at (weights/activations/KV cache): bf16, fp16, fp8, int8 or "
        "int4 (infra/catalog/data/accelerators.json). Default: bf16, or fp16 on a device without bf16 (T4). The "
        "pool's device must support it and the variant must provide it.",
    )

    @field_validator("precision")
    @classmethod
    def _known_precision(cls, value: str | None) -> str | None:
        if value is not None and value not in precision_names():
            raise ValueError(f"{value!r} is not a precision; one of {', '.join(precision_names())}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _schedule_sets_the_minimum(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("schedule") is None:
            return data
        windows = (data.get("schedule") or {}).get("windows") if isinstance(data.get("schedule"), dict) else None
        counts = [w.get("minReplicas") for w in windows or [] if isinstance(w, dict)]
        whole = [c for c in counts if isinstance(c, int) and not isinstance(c, bool)]
        if not whole or len(whole) != len(counts):
            return data  # a window's own check names the count that is not one
        given = data.get("minReplicas", data.get("min_replicas"))
        if given is not None and given != min(whole):
            raise ValueError(
                f"minReplicas {given} with a schedule whose smallest minimum is {min(whole)}: leave minReplicas "
                "unset, the schedule's windows set the minimum"
            )
        return {**{k: v for k, v in data.items() if k != "min_replicas"}, "minReplicas": min(whole)}

    @model_validator(mode="after")
    def _zero_is_asked_for(self) -> ModelSpec:
        if self.min_replicas == 0 and self.scale_to_zero is None:
            raise ValueError(
                "minReplicas 0 (or a schedule window at 0) needs scaleToZero: {} or its settings, so that the front "
                "door holds requests while no replica serves"
            )
        return self

    @property
    def scheduled_peak(self) -> int:
        """The largest minimum the schedule sets (minReplicas without one)."""
        return max((w.min_replicas for w in self.schedule.windows), default=0) if self.schedule else self.min_replicas

    @property
    def artefact_variant(self) -> str:
        return self.variant or DEFAULT_VARIANT[self.accelerator]
