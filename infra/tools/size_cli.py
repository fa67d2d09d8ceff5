"""`python -m infra size`'s parser (registered in infra.cli); the verb itself, and the sizing model it imports,
load only when it runs (infra.tools.size)."""

from __future__ import annotations

import argparse
from typing import Any

from infra.catalog.accelerators import precision_names


def add_size_parser(verbs: Any) -> None:
    size = verbs.add_parser(
        "size",
        help="rank the hardware, precision and replicas that serve a model under a traffic and an SLO",
        description="Every serving type of AWS and GCP at each precision and tensor-parallel degree, with the fewest "
        "replicas that meet the p95 targets under the offered load, ranked by cost (docs/sizing.md).",
    )
    size.add_argument("--model-config", required=True, metavar="PATH", help="the model's Hugging Face config.json")
    size.add_argument("--rate", required=True, type=float, metavar="REQ/S", help="requests per second, the fleet's")
    size.add_argument("--prompt-tokens", required=True, metavar="N|MEAN:P95", help="prompt length: fixed, or mean:p95")
    size.add_argument("--output-tokens", required=True, metavar="N|MEAN:P95", help="output length: fixed, or mean:p95")
    size.add_argument("--ttft-p95-ms", required=True, type=float, help="p95 time to first token target, ms")
    size.add_argument("--tpot-p95-ms", required=True, type=float, help="p95 time per output token target, ms")
    size.add_argument(
        "--precision",
        action="append",
        default=[],
        metavar="NAME",
        help=f"precision to consider (repeatable; {', '.join(precision_names())}); default: each device's 16-bit "
        "format (bf16, fp16 on T4)",
    )
    size.add_argument(
        "--cloud", action="append", choices=("aws", "gcp"), default=[], help="cloud to consider; default: both"
    )
    size.add_argument(
        "--max-model-len", type=int, help="longest context served; default: the model's own, at most 8192"
    )
    size.add_argument("--min-replicas", type=int, default=2, help="replicas kept for availability (default 2)")
    size.add_argument("--max-replicas", type=int, default=64, help="most replicas considered (default 64)")
    size.add_argument("--json", action="store_true", help="print a JSON document")
    size.add_argument("--top", type=int, default=10, help="options shown in the table (default 10; --json has all)")
    size.add_argument("--write", action="store_true", help="print the config of the cheapest option")
    size.add_argument("--name", help="--write: the model entry's name (a DNS label)")
    size.add_argument("--version", help="--write: the registry version to serve")
    size.add_argument("--image", help="--write: the model server image, pinned")
    size.add_argument("--index", type=int, default=0, help="--write: the entry's index in serving.models (default 0)")
    size.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from infra.tools.size import run

    return run(args)
