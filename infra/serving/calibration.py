"""The performance model against published measurements (data/serving_calibration.json): its prediction and
relative error on every point, and the fit of the efficiency factors to the points marked for tuning (pure).

    python -m infra.serving.calibration          # the table: every point, the model's figure, the error
    python -m infra.serving.calibration --fit    # refit on the tuning points; prints the factors to store

A point is never used to tune and to test: `use` is "tune", "test" or "excluded" (with the reason).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from infra.catalog.accelerators import device, precision
from infra.serving.model_shape import ModelShape, load_model_shape
from infra.serving.performance import Efficiency, ReplicaPerformance, efficiency, replica_performance

DATA = Path(__file__).resolve().parents[1] / "catalog" / "data" / "serving_calibration.json"
MODELS = Path(__file__).resolve().parents[2] / "stacks" / "models"


@dataclass(frozen=True)
class Point:
    id: str
    use: str
    device: str
    devices: int
    model: str
    precision: str
    metric: str  # ttft | tpot | throughput
    batch: int
    prompt_tokens: int
    output_tokens: int
    value: float
    source: str
    date: str

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Point:
        return cls(
            raw["id"], raw["use"], raw["device"], raw["devices"], raw["model"], raw["precision"], raw["metric"],
            raw["batch"], raw["promptTokens"], raw["outputTokens"], raw["value"], raw["source"], raw["date"],
        )  # fmt: skip


def load() -> dict[str, Any]:
    return json.loads(DATA.read_text(encoding="utf-8"))


def points(use: str | None = None) -> list[Point]:
    return [Point.from_json(p) for p in load()["points"] if use is None or p["use"] == use]


def _precision(name: str):
    weights, _, kv = name.partition("+kv-")
    found = precision(weights)
    return found.with_kv_cache(kv) if kv else found


@functools.cache
def _shape(model: str) -> ModelShape:
    return load_model_shape(MODELS / model / "config.json")


def replica(point: Point, factors: Efficiency | None = None) -> ReplicaPerformance:
    return replica_performance(
        _shape(point.model),
        device(point.device),
        _precision(point.precision),
        point.devices,
        max_model_len=point.prompt_tokens + point.output_tokens,
        max_num_seqs=point.batch,
        factors=factors,
    )


def predict(point: Point, factors: Efficiency | None = None) -> float:
    """The model's figure for the point's metric and setup."""
    perf = replica(point, factors)
    if point.metric == "ttft":
        return perf.prefill_seconds(point.prompt_tokens)
    if point.metric == "tpot":
        context = point.prompt_tokens + point.output_tokens / 2
        return perf.decode_step_seconds(point.batch, point.batch * context)
    seconds = perf.batch_prefill_seconds(point.prompt_tokens, point.batch) + perf.decode_seconds(
        point.batch, point.prompt_tokens, point.output_tokens
    )
    return point.batch * point.output_tokens / seconds


def error(point: Point, factors: Efficiency | None = None) -> float:
    """Relative error of the model on the point: (predicted - measured) / measured."""
    return (predict(point, factors) - point.value) / point.value


def kind_of(point: Point) -> str:
    return device(point.device).kind


# The search space of each factor: the fit walks one factor at a time over its grid until nothing improves.
GRIDS: dict[str, Sequence[float]] = {
    "decode_bandwidth": [round(0.20 + 0.01 * i, 2) for i in range(76)],
    "prefill_compute": [round(0.02 + 0.01 * i, 2) for i in range(79)],
    "step_overhead_seconds": [round(0.0005 * i, 4) for i in range(61)],
    "sequence_overhead_seconds": [round(0.00002 * i, 5) for i in range(26)],
    "allreduce_seconds": [round(0.000005 * i, 6) for i in range(41)],
}


def fit(kind: str, tune: Iterable[Point] | None = None) -> Efficiency:
    """Coordinate descent minimising the squared log error (predicted/measured) over the tuning points of one
    device kind: over- and under-prediction weigh alike, and no single point dominates the fit."""
    chosen = [p for p in (tune if tune is not None else points("tune")) if kind_of(p) == kind]
    if not chosen:
        raise ValueError(f"no tuning point for {kind}")
    current = Efficiency(0.6, 0.4, 0.005, 0.0, 0.00002)

    def worst(factors: Efficiency) -> float:
        return sum(math.log(predict(p, factors) / p.value) ** 2 for p in chosen)

    best = worst(current)
    for _ in range(8):
        improved = False
        for name, grid in GRIDS.items():
            for value in grid:
                candidate = replace(current, **{name: value})
                score = worst(candidate)
                if score < best - 1e-9:
                    current, best, improved = candidate, score, True
        if not improved:
            break
    return current


def table(rows: Iterable[Point], factors: Callable[[str], Efficiency] = efficiency) -> list[str]:
    lines = ["| point | use | device | model | precision | metric | measured | model | error |", "|" + "---|" * 9]
    for p in rows:
        if p.use == "excluded":
            continue
        predicted = predict(p, factors(kind_of(p)))
        unit = "tok/s" if p.metric == "throughput" else "ms"
        scale = 1 if p.metric == "throughput" else 1000
        lines.append(
            f"| {p.id} | {p.use} | {p.devices} x {p.device} | {p.model} | {p.precision} | {p.metric} | "
            f"{p.value * scale:.4g} {unit} | {predicted * scale:.4g} {unit} | {(predicted - p.value) / p.value:+.0%} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="refit the factors on the tuning points and print them")
    args = parser.parse_args(argv)
    if args.fit:
        fitted = {kind: fit(kind) for kind in ("gpu", "neuron")}
        print(json.dumps({k: _as_json(v) for k, v in fitted.items()}, indent=1))
        return 0
    print("\n".join(table(points())))
    return 0


def _as_json(factors: Efficiency) -> dict[str, float]:
    return {
        "decodeBandwidth": factors.decode_bandwidth,
        "prefillCompute": factors.prefill_compute,
        "stepOverheadSeconds": factors.step_overhead_seconds,
        "sequenceOverheadSeconds": factors.sequence_overhead_seconds,
        "allreduceSeconds": factors.allreduce_seconds,
    }


if __name__ == "__main__":
    sys.exit(main())
