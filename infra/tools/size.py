"""`python -m infra size` (its parser: infra.tools.size_cli): the feasible (cloud, instance type, precision, tensor
parallel, replicas) options for a model under a traffic and an SLO, ranked by cost, and why the others were
refused (docs/sizing.md)."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from infra.catalog.accelerators import UnknownAcceleratorFact, precision
from infra.core.bounds import positive_within
from infra.core.errors import InputError, Problem
from infra.serving.model_shape import ModelConfigError, load_model_shape
from infra.serving.queueing import Lengths, Traffic
from infra.serving.sizing import Option, Plan, Request, Slo, plan
from infra.serving.spec import MAX_SLO_MS, ModelSpec
from infra.tools.size_config import write_lines

LENGTHS = re.compile(r"^(\d+)(?::(\d+))?$")


def _lengths(flag: str, text: str) -> Lengths:
    match = LENGTHS.match(text.strip())
    if not match or int(match.group(1)) < 1 or (match.group(2) and int(match.group(2)) < int(match.group(1))):
        raise InputError(Problem(flag, f"{text!r} is not a length: N tokens, or MEAN:P95 with 1 <= MEAN <= P95"))
    mean = int(match.group(1))
    return Lengths(mean, int(match.group(2) or mean))


MAX_RATE = 1_000_000.0  # requests per second, a fleet's


# A model entry's own bounds (infra/serving/spec.py ModelSpec: maxReplicas, maxModelLen), which --write fills.
def _bound(field: str, name: str) -> int:
    return int(next(getattr(m, name) for m in ModelSpec.model_fields[field].metadata if hasattr(m, name)))


MAX_REPLICAS = _bound("max_replicas", "le")
MIN_MODEL_LEN, MAX_MODEL_LEN = _bound("max_model_len", "ge"), _bound("max_model_len", "le")


def request_from(args: argparse.Namespace) -> Request:
    bounded = (
        ("--rate", args.rate, MAX_RATE),
        ("--ttft-p95-ms", args.ttft_p95_ms, MAX_SLO_MS),
        ("--tpot-p95-ms", args.tpot_p95_ms, MAX_SLO_MS),
    )
    problems = [p for flag, value, most in bounded if (p := positive_within(flag, value, most))]
    if args.min_replicas < 1 or args.max_replicas < args.min_replicas:
        problems.append(Problem("--max-replicas", "need 1 <= --min-replicas <= --max-replicas"))
    elif args.max_replicas > MAX_REPLICAS:
        problems.append(
            Problem("--max-replicas", f"{args.max_replicas} is more than {MAX_REPLICAS} (a model entry's own bound)")
        )
    if args.top < 1:
        problems.append(Problem("--top", f"{args.top} must be 1 or more"))
    if args.max_model_len is not None and not MIN_MODEL_LEN <= args.max_model_len <= MAX_MODEL_LEN:
        problems.append(
            Problem("--max-model-len", f"{args.max_model_len} must be from {MIN_MODEL_LEN} to {MAX_MODEL_LEN:,}")
        )
    precisions = []
    for name in args.precision or ["bf16", "fp16"]:
        try:
            precisions.append(precision(name))
        except UnknownAcceleratorFact as error:
            problems.append(Problem("--precision", str(error)))
    try:
        shape = load_model_shape(args.model_config)
    except ModelConfigError as error:
        problems.append(Problem("--model-config", str(error)))
    if args.write and not (args.name and args.version and args.image):
        problems.append(Problem("--write", "needs --name, --version and --image for the model entry"))
    if problems:
        raise InputError(problems)
    prompt, output = _lengths("--prompt-tokens", args.prompt_tokens), _lengths("--output-tokens", args.output_tokens)
    max_model_len = args.max_model_len or min(shape.max_position_embeddings or 8192, 8192)
    if shape.max_position_embeddings and max_model_len > shape.max_position_embeddings:
        raise InputError(
            Problem(
                "--max-model-len",
                f"{max_model_len} is longer than the model's context ({shape.max_position_embeddings} tokens, its "
                "max_position_embeddings), which vLLM refuses",
            )
        )
    if max_model_len < prompt.p95 + output.p95:
        raise InputError(
            Problem(
                "--max-model-len",
                f"{max_model_len} is shorter than a p95 prompt and output ({prompt.p95:g} + {output.p95:g} tokens)",
            )
        )
    return Request(
        shape=shape,
        traffic=Traffic(args.rate, prompt, output),
        slo=Slo(args.ttft_p95_ms / 1000, args.tpot_p95_ms / 1000),
        precisions=tuple(precisions),
        max_model_len=max_model_len,
        min_replicas=args.min_replicas,
        max_replicas=args.max_replicas,
        clouds=tuple(args.cloud or ("aws", "gcp")),
        sixteen_bit_default=not args.precision,
    )


def _row(option: Option, request: Request) -> dict[str, Any]:
    prediction = option.prediction
    return {
        "cloud": option.offer.cloud,
        "instanceType": option.offer.instance_type,
        "device": option.offer.device.name,
        "precision": option.precision.name,
        "tensorParallel": option.tensor_parallel,
        "replicas": option.replicas,
        "nodes": option.nodes,
        "ttftP95Ms": round(prediction.ttft_p95_seconds * 1000, 1),
        "tpotP95Ms": round(prediction.tpot_p95_seconds * 1000, 2),
        "outputTokensPerSecondPerReplica": round(option.tokens_per_second_per_replica, 1),
        "usdPerHour": round(option.cost_per_hour, 4),
        "usdPerMillionOutputTokens": round(option.cost_per_million_output_tokens(request.traffic), 4),
    }


def document(result: Plan, request: Request) -> dict[str, Any]:
    return {
        "options": [_row(o, request) for o in result.options],
        "refused": [
            {
                "cloud": r.offer.cloud,
                "instanceType": r.offer.instance_type,
                "precision": r.precision.name,
                "tensorParallel": r.tensor_parallel,
                "reason": r.reason,
            }
            for r in result.refused
        ],
    }


def table(result: Plan, request: Request, top: int) -> list[str]:
    header = ("#", "cloud", "type", "device", "prec", "TP", "replicas", "nodes", "TTFT p95", "TPOT p95", "tok/s/repl",
              "$/h", "$/M out tok")  # fmt: skip
    rows = [
        (
            str(i + 1),
            o.offer.cloud,
            o.offer.instance_type,
            o.offer.device.name,
            o.precision.name,
            str(o.tensor_parallel),
            str(o.replicas),
            str(o.nodes),
            f"{o.prediction.ttft_p95_seconds * 1000:.0f} ms",
            f"{o.prediction.tpot_p95_seconds * 1000:.1f} ms",
            f"{o.tokens_per_second_per_replica:.0f}",
            f"{o.cost_per_hour:.2f}",
            f"{o.cost_per_million_output_tokens(request.traffic):.2f}",
        )  # fmt: skip
        for i, o in enumerate(result.options[:top])
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]]
    if not rows:
        lines = ["no option meets the SLO under this traffic; the reasons each was refused:"]
    elif len(result.options) > top:
        lines.append(f"... {len(result.options) - top} more options (--top N, or --json)")
    lines += ["", f"refused ({len(result.refused)}):"]
    lines += [
        f"  {r.offer.cloud}:{r.offer.instance_type} {r.precision.name}"
        + (f" TP {r.tensor_parallel}" if r.tensor_parallel else "")
        + f": {r.reason}"
        for r in result.refused
    ]
    traffic, slo = request.traffic, request.slo
    lines += [
        "",
        f"traffic: {traffic.rate_per_second:g} req/s, prompt {traffic.prompt.mean:g} (p95 {traffic.prompt.p95:g}), "
        f"output {traffic.output.mean:g} (p95 {traffic.output.p95:g}) tokens; SLO p95 TTFT "
        f"{slo.ttft_p95_seconds * 1000:g} ms, TPOT {slo.tpot_p95_seconds * 1000:g} ms; maxModelLen "
        f"{request.max_model_len}. Prices: on demand, us-east-1 / us-central1 (docs/reference.md). Predictions: "
        "the calibrated model of docs/sizing.md (held-out error in benchmarks/RESULTS.md).",
    ]
    return lines


def run(args: argparse.Namespace) -> int:
    request = request_from(args)
    result = plan(request)
    if args.json:
        doc = document(result, request)
        if args.write and result.cheapest:
            doc["write"] = write_lines(result.cheapest, request, args)
        print(json.dumps(doc, indent=2))
        return 0 if result.options else 1
    print("\n".join(table(result, request, args.top)))
    if args.write and result.cheapest:
        print("\n" + "\n".join(write_lines(result.cheapest, request, args)))
    return 0 if result.options else 1
