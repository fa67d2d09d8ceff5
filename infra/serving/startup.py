"""A replica's start-up budget: how long from a pod the autoscaler asks for to a replica that serves, term by term,
computed from the plan (pure; docs/serving.md "Start-up budget").

Terms, in the order they happen on a node the cluster autoscaler adds:

- node: launch to a Ready node with its device plugin (nothing of it happens on a node that is already up);
- image: the server image pulled and unpacked (a node that holds the pinned tag pulls nothing);
- weights: the served variant's weights from the registry (streamed to the devices on GPUs, copied to the node's
  disk on Neuron), at a share of the node's network bandwidth;
- engine: the engine's start once the weights are there (CUDA graph capture, or Neuron loading its compiled,
  sharded artefact: promote compiles it, so no compile happens at start);
- ready: the readiness probe's period, the most a ready server waits to be sent traffic.

Each figure's basis is in infra/catalog/data/serving_startup.json: assumptions within sourced ranges, which a real
cluster confirms (kubectl get events, and the node's Ready condition time minus its launch time). The twin plays
the same terms; the scale-to-zero and cooldown checks bound by them.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

from infra.core.errors import Problem
from infra.serving import engine, fit, servers
from infra.serving.families import FAMILIES
from infra.serving.model_shape import ModelConfigError
from infra.serving.spec import ModelSpec

STARTUP_ANNOTATION = "mlinfra.io/startup-budget"
TERM_NAMES = ("node", "image", "weights", "engine", "ready")
# A model entry without a modelConfig has no weight size: an 8B model at bf16 (~16 GB) is assumed.
ASSUMED_WEIGHT_BYTES = 16e9


@functools.cache
def startup_facts() -> Mapping[str, Any]:
    """infra/catalog/data/serving_startup.json: each fact's value, basis, source and date."""
    text = (files("infra.catalog") / "data" / "serving_startup.json").read_text(encoding="utf-8")
    loaded: Mapping[str, Any] = json.loads(text)
    return loaded


@dataclass(frozen=True)
class Term:
    name: str
    seconds: float
    basis: str  # the arithmetic and its inputs, in a few words


@dataclass(frozen=True)
class StartupBudget:
    """One replica's start-up on one instance or machine type."""

    instance_type: str
    node: Term
    image: Term
    weights: Term
    engine: Term
    ready: Term

    @property
    def terms(self) -> tuple[Term, ...]:
        return (self.node, self.image, self.weights, self.engine, self.ready)  # in TERM_NAMES' order

    @property
    def from_zero_seconds(self) -> float:
        """A replica on a node added for it: every term."""
        return sum(t.seconds for t in self.terms)

    @property
    def on_node_seconds(self) -> float:
        """A replica on a node that is up and holds the image: weights, engine, ready."""
        return self.weights.seconds + self.engine.seconds + self.ready.seconds

    @property
    def pod_start_seconds(self) -> float:
        """From the image in place to /health answering: what the twin plays after a pull."""
        return self.weights.seconds + self.engine.seconds

    def summary(self) -> str:
        terms = ", ".join(f"{t.name} {_minutes(t.seconds)}" for t in self.terms)
        return (
            f"{_minutes(self.from_zero_seconds)} from zero on {self.instance_type} ({terms}); "
            f"{_minutes(self.on_node_seconds)} on a node that holds the image"
        )

    def as_annotation(self) -> dict[str, float]:
        return {t.name: round(t.seconds, 1) for t in self.terms}


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def startup_budget(
    instance_type: str,
    device_kind: str,
    network_gbps: float | None,
    weight_bytes: float | None,
    readiness_period_seconds: float,
) -> StartupBudget:
    """The budget of a replica whose weights are `weight_bytes` (None: ASSUMED_WEIGHT_BYTES) on `instance_type`,
    whose devices are of `device_kind` ("gpu" or "neuron") and whose network is `network_gbps` (None: the facts'
    fallback, for machine types the catalog gives no bandwidth)."""
    facts = startup_facts()
    pull = facts["imagePull"]["value"]
    load = facts["weightLoad"]["value"]
    gbps = network_gbps or float(load["fallbackGbps"])
    share = float(load["networkShare"])
    size = ASSUMED_WEIGHT_BYTES if weight_bytes is None else weight_bytes
    sized = "assumed 8B bf16" if weight_bytes is None else "the variant's"
    return StartupBudget(
        instance_type,
        Term("node", float(facts["nodeReadySeconds"]["value"][device_kind]), "launch to a Ready node"),
        Term(
            "image",
            pull["imageBytes"] / pull["bytesPerSecond"],
            f"{pull['imageBytes'] / 1e9:.0f} GB at {pull['bytesPerSecond'] / 1e6:.0f} MB/s",
        ),
        Term(
            "weights",
            size / (gbps * 1e9 / 8 * share),
            f"{size / 1e9:.1f} GB ({sized}) at {share:.0%} of {gbps:g} Gbps",
        ),
        Term("engine", float(facts["engineInitSeconds"]["value"][device_kind]), f"{device_kind} engine start"),
        Term("ready", readiness_period_seconds, "one readiness period"),
    )


def slowest(budgets: Mapping[str, StartupBudget]) -> StartupBudget | None:
    """The budget a bound must hold for: the slowest from zero of the types that hold a replica."""
    return max(budgets.values(), key=lambda b: b.from_zero_seconds, default=None)


def model_budgets(model: ModelSpec, types: Mapping[str, float | None]) -> dict[str, StartupBudget]:
    """The model's budget on each of `types` (the instance or machine types of its pool that hold a replica, with
    their network bandwidth in Gbps, None where the catalog has none)."""
    try:
        shape = fit.load_shape(model)
    except ModelConfigError:  # refused by the fit check, naming the file's problem
        shape = None
    weights = None if shape is None else shape.weight_bytes(engine.precision_of(model).weights)
    kind = "neuron" if FAMILIES[model.accelerator].neuron else "gpu"
    return {
        name: startup_budget(name, kind, gbps, weights, servers.READINESS_PERIOD_SECONDS)
        for name, gbps in types.items()
    }


def annotation(budgets: Mapping[str, StartupBudget]) -> str:
    """The Deployment's STARTUP_ANNOTATION: each type's terms in seconds, for the policies and the report."""
    return json.dumps({name: b.as_annotation() for name, b in budgets.items()}, sort_keys=True, separators=(",", ":"))


def from_annotation(value: str) -> dict[str, StartupBudget]:
    """Each type's budget in a STARTUP_ANNOTATION (its terms' bases read "as annotated"); ValueError when it is not
    one mlinfra wrote."""
    try:
        raw = json.loads(value)
        found = {str(name): {t: float(terms[t]) for t in TERM_NAMES} for name, terms in raw.items()}
    except (json.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
        found = {}
    if not found or any(v < 0 or v != v for terms in found.values() for v in terms.values()):
        raise ValueError(f"{STARTUP_ANNOTATION} is not a start-up budget written by mlinfra")
    return {
        name: StartupBudget(name, *(Term(t, terms[t], "as annotated") for t in TERM_NAMES))
        for name, terms in found.items()
    }


def whole_minutes(seconds: float) -> int:
    """`seconds` rounded up to a whole minute, in seconds: what a bound derived from a budget is set to."""
    return 60 * math.ceil(seconds / 60)


def describe(model_name: str, budgets: Mapping[str, StartupBudget]) -> str:
    """One line for the preview: the slowest type's budget, term by term."""
    slow = slowest(budgets)
    if slow is None:
        return f"start-up {model_name}: no type of its pool holds a replica (the config check says why)"
    return f"start-up {model_name}: {slow.summary()}"


# KEDA's own default cooldownPeriod: the least a derived cooldown is.
KEDA_DEFAULT_COOLDOWN_SECONDS = 300


def cooldown_seconds(model: ModelSpec, budgets: Mapping[str, StartupBudget]) -> int:
    """The idle time before a model's last replica goes: scaleToZero.cooldownSeconds, else its start-up budget from
    zero rounded up to the minute (a pool that goes sooner than it comes back flaps)."""
    declared = model.scale_to_zero.cooldown_seconds if model.scale_to_zero else None
    if declared is not None:
        return declared
    slow = slowest(budgets)
    derived = whole_minutes(slow.from_zero_seconds) if slow else KEDA_DEFAULT_COOLDOWN_SECONDS
    return max(KEDA_DEFAULT_COOLDOWN_SECONDS, derived)


def lead_seconds(budgets: Mapping[str, StartupBudget]) -> float:
    """How far ahead of a schedule window its replicas are asked for: the slowest start-up from zero."""
    slow = slowest(budgets)
    return slow.from_zero_seconds if slow else 0.0


def zero_findings(where: str, model: ModelSpec, budgets: Mapping[str, StartupBudget], gateway: bool) -> list[Problem]:
    """A model that may scale to zero (`where` ends in "."): it needs the front door's hold, a cooldown no shorter
    than its start-up from zero, and a hold that covers a start on a node that is still up."""
    zero = model.scale_to_zero
    if zero is None:
        return []
    if model.min_replicas > 0:
        return [
            Problem(
                where + "scaleToZero",
                f"set, but the minimum is {model.min_replicas}: nothing goes to zero; remove it, or set minReplicas "
                "0 or a schedule window at 0",
            )
        ]
    if not gateway:
        return [
            Problem(
                where + "scaleToZero",
                "needs the stack's front door (serving.gateway): it holds the requests that arrive while no replica "
                "serves and they wake the pool; without it they would be refused",
            )
        ]
    slow = slowest(budgets)
    if slow is None:
        return []
    found = []
    if zero.cooldown_seconds is not None and zero.cooldown_seconds < slow.from_zero_seconds:
        found.append(
            Problem(
                where + "scaleToZero.cooldownSeconds",
                f"{zero.cooldown_seconds}: shorter than the replica's start-up from zero ({slow.summary()}): the "
                f"pool would go sooner than it comes back; use at least {whole_minutes(slow.from_zero_seconds)} "
                "or leave it unset",
            )
        )
    if zero.hold_seconds < slow.on_node_seconds:
        found.append(
            Problem(
                where + "scaleToZero.holdSeconds",
                f"{zero.hold_seconds}: a replica takes {slow.on_node_seconds:.0f} s to serve even on a node that is "
                f"still up and holds the image ({slow.instance_type}), so no request would be held through a start; "
                f"use at least {math.ceil(slow.on_node_seconds)}",
            )
        )
    return found


def zero_summary(model: ModelSpec, budgets: Mapping[str, StartupBudget]) -> str | None:
    """One line for the preview of a model that may scale to zero: what a request meets at zero, and when the pool
    goes."""
    zero, slow = model.scale_to_zero, slowest(budgets)
    if zero is None or slow is None:
        return None
    line = (
        f"scale to zero {model.name}: at zero the front door holds a request up to {_minutes(zero.hold_seconds)} "
        f"(a start on a node still up takes {_minutes(slow.on_node_seconds)}, from zero "
        f"{_minutes(slow.from_zero_seconds)}), then answers 503 with Retry-After; the last replica goes after "
        f"{_minutes(cooldown_seconds(model, budgets))} without a request"
    )
    if model.schedule is not None:
        line += (
            f"; schedule in {model.schedule.timezone}, each window's replicas asked for "
            f"{whole_minutes(lead_seconds(budgets)) // 60} min ahead"
        )
    return line
