"""Does a model server fit the devices it runs on? The meaning check both clouds' configs run, and what the
policy pack reads back from the Deployment (pure; docs/sizing.md).

A model entry names its architecture (`modelConfig`: a Hugging Face config.json, a path relative to the
project root) and its precision (default: bf16, or fp16 on a device without bf16). The check refuses a
precision the pool's device cannot serve (naming the hardware), a precision the variant does not provide,
and a replica whose weights + KV cache + runtime overhead exceed its devices' memory (with the figures).
The Deployment carries the architecture and precision as annotations, so the mandatory policy
model-servers-fit-their-devices checks the same arithmetic on any preview, ours or Pulumi's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from infra.catalog.accelerators import Device, device
from infra.core.errors import Problem
from infra.core.project import ROOT
from infra.serving import engine
from infra.serving.families import FAMILIES
from infra.serving.model_shape import ModelConfigError, ModelShape, load_model_shape
from infra.serving.performance import ReplicaDoesNotFit, memory_fit, replica_performance
from infra.serving.spec import VARIANT_PRECISIONS, ModelSpec

ARCHITECTURE_ANNOTATION = "mlinfra.io/model-architecture"
PRECISION_ANNOTATION = "mlinfra.io/precision"


# Host memory of one replica while it loads the weights, from their size S in GiB (estimates on the safe
# side, not measurements): NxD Inference reads the whole sharded model into host memory on its way to the
# devices; vLLM's streamer on GPUs holds a shard or so in flight. Promotion and the sizing both use it.
HOST_MEMORY = {"neuron": (1.1, 4.0), "gpu": (0.25, 6.0)}  # factor, base GiB


def host_memory_gib(device_kind: str, weights_bytes: float) -> int:
    factor, base = HOST_MEMORY[device_kind]
    return math.ceil(factor * weights_bytes / 1024**3 + base)


# A Neuron server copies its artefact to a local volume before it starts (manifests.py): the variant's sharded
# weights plus the compiled graphs and the config (estimate on the safe side, rounded up to 10 GiB). Without a
# modelConfig to size it from, a volume for models up to ~70 GiB of weights.
ARTEFACT_VOLUME = (1.2, 10.0)  # factor, base GiB
DEFAULT_ARTEFACT_VOLUME_GIB = 100


def artefact_volume_gib(model: ModelSpec, root: Path = ROOT) -> int:
    """GiB of local disk a replica's copy of its artefact takes (only servers that fetch it to disk have one)."""
    try:
        shape = load_shape(model, root)
    except ModelConfigError:  # refused by the fit check, with the file's problem
        shape = None
    if shape is None:
        return DEFAULT_ARTEFACT_VOLUME_GIB
    factor, base = ARTEFACT_VOLUME
    weights = shape.weight_bytes(engine.precision_of(model).weights) / 1024**3
    return 10 * math.ceil((factor * weights + base) / 10)


def config_path(model: ModelSpec, root: Path = ROOT) -> Path | None:
    if model.architecture_config is None:
        return None
    path = Path(model.architecture_config)
    return path if path.is_absolute() else root / path


def load_shape(model: ModelSpec, root: Path = ROOT) -> ModelShape | None:
    """The model's architecture from its modelConfig; None without one; ModelConfigError when unreadable."""
    path = config_path(model, root)
    return None if path is None else load_model_shape(path)


def fit_findings(
    where: str, model: ModelSpec, devices: Sequence[Device], root: Path = ROOT, shape: ModelShape | None = None
) -> list[Problem]:
    """Problems of one model entry (`where` = its key path, ending in ".") on the devices its pool carries."""
    try:
        shape = shape or load_shape(model, root)
    except ModelConfigError as error:
        return [Problem(where + "modelConfig", str(error))]
    findings: list[Problem] = []
    for found in {d.name: d for d in devices}.values():  # each device once, in pool order
        chosen = engine.precision_of(model)
        why = found.unsupported(chosen)
        if why:
            findings.append(Problem(where + "precision", f"{chosen.name} on {model.accelerator}: {why}"))
            continue
        served = VARIANT_PRECISIONS[model.artefact_variant]
        if chosen.name not in served:
            findings.append(
                Problem(
                    where + "precision",
                    f"the {model.artefact_variant} variant serves {', '.join(served)}, not {chosen.name}; "
                    "a quantised precision needs a variant built for it",
                )
            )
            continue
        if shape is None:
            continue
        fit = memory_fit(
            shape,
            found,
            chosen,
            model.accelerators_per_replica,
            model.max_model_len,
            engine.max_num_seqs(model),
            model=model.name,
        )
        if not fit.fits:
            weights_alone = fit.weights <= fit.available
            key = "maxModelLen" if weights_alone else "acceleratorsPerReplica"
            fix = (
                "lower maxModelLen" + (" or maxNumSeqs" if found.kind == "neuron" else "")
                if weights_alone
                else "raise acceleratorsPerReplica (a larger size of the pool) or pick a device with more memory"
            )
            findings.append(Problem(where + key, f"does not fit: {fit.explain()}; {fix}"))
            continue
        findings += _slo_findings(where, model, shape, found)
    return findings


DEFAULT_QUEUE_DEPTH = 4  # waiting requests per replica, without an slo to derive it from


def slo_prompt_tokens(model: ModelSpec) -> int:
    slo = model.slo
    return (slo.prompt_tokens_p95 if slo and slo.prompt_tokens_p95 else None) or min(2048, model.max_model_len // 2)


def _unloaded(model: ModelSpec, shape: ModelShape, found: Device) -> tuple[float, float, float]:
    """(TTFT, TPOT, prefill) of one request alone on a replica, seconds, for the slo's p95 prompt."""
    perf = replica_performance(
        shape,
        found,
        engine.precision_of(model),
        model.accelerators_per_replica,
        model.max_model_len,
        engine.max_num_seqs(model),
    )
    prompt = slo_prompt_tokens(model)
    step = perf.decode_step_seconds(1, prompt)
    prefill = perf.prefill_seconds(prompt)
    return prefill + step, step, prefill


def _slo_findings(where: str, model: ModelSpec, shape: ModelShape, found: Device) -> list[Problem]:
    if model.slo is None:
        return []
    ttft, tpot, _ = _unloaded(model, shape, found)
    setup = f"{model.accelerators_per_replica} x {found.name} at {engine.precision_of(model).name}"
    findings = []
    if ttft * 1000 > model.slo.ttft_p95_ms:
        findings.append(
            Problem(
                where + "slo.ttftP95Ms",
                f"{model.slo.ttft_p95_ms:g} ms cannot be met: on {setup} a {slo_prompt_tokens(model)}-token prompt "
                f"takes {ttft * 1000:.0f} ms to its first token with no other request (performance model, "
                "docs/sizing.md); a faster device, more accelerators per replica or a shorter prompt would",
            )
        )
    if tpot * 1000 > model.slo.tpot_p95_ms:
        findings.append(
            Problem(
                where + "slo.tpotP95Ms",
                f"{model.slo.tpot_p95_ms:g} ms cannot be met: on {setup} one output token takes {tpot * 1000:.1f} ms "
                "with no other request (the weights are read once per token); a device with more memory bandwidth, "
                "more accelerators per replica or a smaller precision would",
            )
        )
    return findings


def queue_depth_target(model: ModelSpec, root: Path = ROOT) -> int:
    """Waiting requests per replica above which the autoscaler adds replicas: set by hand, else what a replica
    works off within the TTFT target (each waiting request costs a prefill), else DEFAULT_QUEUE_DEPTH."""
    scaling = model.autoscaling.queue_depth_target
    if scaling is not None:
        return scaling
    shape = load_shape(model, root)
    if model.slo is None or shape is None:
        return DEFAULT_QUEUE_DEPTH
    found = device(FAMILIES[model.accelerator].devices[0])
    try:
        ttft, _, prefill = _unloaded(model, shape, found)
    except ReplicaDoesNotFit:
        return DEFAULT_QUEUE_DEPTH  # the config check refuses it
    slack = model.slo.ttft_p95_ms / 1000 - ttft
    return max(1, min(1000, int(slack // prefill)))


def deployment_annotations(model: ModelSpec, root: Path = ROOT) -> dict[str, str]:
    """The Deployment's annotations the fit policy reads: the architecture (shape) and the precision."""
    shape = load_shape(model, root)
    if shape is None:
        return {}
    return {
        ARCHITECTURE_ANNOTATION: json.dumps(asdict(shape), sort_keys=True, separators=(",", ":")),
        PRECISION_ANNOTATION: engine.precision_of(model).name,
    }


def shape_from_annotation(value: str) -> ModelShape:
    """The ModelShape a Deployment's architecture annotation carries; ValueError when it is not one."""
    try:
        raw = json.loads(value)
        return ModelShape(**raw) if isinstance(raw, Mapping) else _not_a_shape()
    except (json.JSONDecodeError, TypeError):
        return _not_a_shape()


def _not_a_shape() -> ModelShape:
    raise ValueError(f"{ARCHITECTURE_ANNOTATION} is not a model architecture written by mlinfra")
