"""Prints, as JSON, everything the twin computes for a few runs of serving-demo's preview, floats as repr (bit
for bit): the tally with both histograms, the series, node seconds and cost. test_accel.py runs it once with the
compiled twin and once from the source (MLINFRA_TWIN_PURE=1) and compares. `python -m` this module."""

from __future__ import annotations

import json
from dataclasses import replace

import infra.serving.twin as twin_package
from infra.core.paths import parse_override
from infra.serving.queueing import Lengths
from infra.serving.twin import engine, replica, traces
from infra.serving.twin.engine import Outcome
from infra.tools import preview_json
from infra.tools.offline.digest import to_digest
from infra.tools.offline.engine import preview
from infra.tools.simulate.settings import twins

OVERRIDES = ("mlinfra:serving.models[1].maxReplicas=12", "mlinfra:serving.nodePools.g5.maxSize=12")


def _outcome(outcome: Outcome) -> dict[str, object]:
    tally = outcome.tally
    return {
        "tally": [
            tally.arrived, tally.completed, tally.timed_out, tally.refused, tally.killed, tally.output_tokens,
            tally.unserved_tokens, tally.over_slo, sorted(tally.ttft_ms.items()), sorted(tally.tpot_ms10.items()),
        ],
        "series": [[repr(t), *rest] for t, *rest in outcome.series],
        "nodeSeconds": {k: repr(v) for k, v in sorted(outcome.node_seconds.items())},
        "cost": repr(outcome.cost),
        "changes": [outcome.scale_changes, outcome.direction_changes, outcome.nodes_launched, outcome.reclaims],
    }  # fmt: skip


def main() -> None:
    result = preview("serving-demo", [parse_override(o) for o in OVERRIDES])
    document = preview_json.parse(to_digest(result), "serving-demo")
    runs: dict[str, object] = {
        "engine": twin_package.ENGINE,
        "files": [m.__file__ for m in (engine, replica, traces)],
    }
    for spot in (0.0, 2.0):
        for twin in twins(document, None, None, 60.0, spot):
            cases = [
                ("burst", 12.0, Lengths(512, 1536), Lengths(256, 768), 1),
                ("diurnal", 20.0, Lengths(512, 1536), Lengths(256, 768), 3),
                ("ramp", 6.0, Lengths(300, 300), Lengths(100, 400), 2),  # one length fixed: generate()'s own loop
            ]
            for shape_name, rate, prompt, output, hours in cases:
                seconds = hours * 3600.0
                shape = traces.Shape(shape_name, rate, seconds, prompt, output, twin.perf.max_model_len, 7)
                drawn = list(traces.generate(shape))
                key = f"{twin.model} {shape_name} spot={spot}"
                runs[key] = {
                    "trace": [len(drawn), repr(sum(t for t, _, _ in drawn)), sum(p + o for _, p, o in drawn)],
                    "outcome": _outcome(engine.simulate(twin, drawn, seconds, 7)),
                }
            short = replace(twin, timeout_seconds=5.0, initial_replicas=1)  # timeouts and scale-from-few
            log = traces.parse_log("timestamp,prompt_tokens,output_tokens\n" + "".join(
                f"{i * 0.05},{1 + (i * 37) % 3000},{1 + (i * 53) % 900}\n" for i in range(4000)
            ))  # fmt: skip
            runs[f"{twin.model} replay spot={spot}"] = _outcome(engine.simulate(short, log, 900.0, 3))
    print(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
