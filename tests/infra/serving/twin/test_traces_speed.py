"""The inlined draw (traces._both_lognormal) gives exactly the requests of the loop written with random's methods.

`reference` is generate() as it was before the inlining (expovariate and gauss called per request); the twin's
figures depend on every bit of the trace, so the comparison is exact, over shapes, seeds, token lengths and
context caps that clip. It fails if a Python release changes random.gauss or random.expovariate.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

import pytest

from infra.serving.queueing import Z95, Lengths
from infra.serving.twin.traces import SHAPES, Shape, generate


def _sigma(lengths: Lengths) -> float:
    """The lognormal's sigma through mean and p95, as traces.py takes it."""
    if lengths.p95 <= lengths.mean:
        return 0.0
    disc = Z95**2 - 2 * math.log(lengths.p95 / lengths.mean)
    return Z95 - math.sqrt(disc) if disc > 0 else Z95


def reference(shape: Shape) -> Iterator[tuple[float, int, int]]:
    rng = random.Random(shape.seed)
    rates = [shape.rate(second + 0.5) for second in range(math.ceil(shape.seconds) + 1)]
    ps, os_ = _sigma(shape.prompt), _sigma(shape.output)
    pmu, omu = math.log(shape.prompt.mean) - ps * ps / 2, math.log(shape.output.mean) - os_ * os_ / 2
    cap = shape.max_tokens
    second, rate, floor, s = 0, rates[0], 0.0, 0.0
    while True:
        s += rng.expovariate(1.0)
        while s >= floor + rate:
            floor += rate
            second += 1
            if second >= len(rates):
                return
            rate = rates[second]
        t = second + (s - floor) / rate
        if t >= shape.seconds:
            return
        prompt = round(math.exp(pmu + ps * rng.gauss())) if ps else round(shape.prompt.mean)
        prompt = min(max(prompt, 1), cap - 1)
        out = round(math.exp(omu + os_ * rng.gauss())) if os_ else round(shape.output.mean)
        out = min(max(out, 1), cap - prompt)
        yield t, prompt, out


CASES = [(name, seed, Lengths(512, 1536), Lengths(256, 768), 4096) for name in SHAPES for seed in (0, 1, 12345)] + [
    ("diurnal", 3, Lengths(2000, 6000), Lengths(900, 4000), 4096),  # clipped at the context often
    ("burst", 4, Lengths(300, 300), Lengths(100, 400), 8192),  # fixed prompts: the loop with gauss() once
    ("ramp", 5, Lengths(300, 900), Lengths(128, 128), 8192),  # fixed outputs
    ("steady", 6, Lengths(64, 64), Lengths(32, 32), 2048),  # both fixed
]


@pytest.mark.parametrize(("name", "seed", "prompt", "output", "cap"), CASES)
def test_the_inlined_draw_is_the_library_draw_exactly(name, seed, prompt, output, cap):
    seconds = 9 * 3600.0 if name == "office" else 7200.0  # the office shape's traffic starts at 07:00
    shape = Shape(name, 5.0, seconds, prompt, output, cap, seed)
    mine, theirs = list(generate(shape)), list(reference(shape))
    assert len(mine) > 10000
    assert mine == theirs
    assert [math.copysign(1.0, t) for t, _, _ in mine] == [1.0] * len(mine)  # no -0.0 sneaks in either


def test_the_clipping_case_clips():
    shape = Shape("diurnal", 5.0, 7200.0, Lengths(2000, 6000), Lengths(900, 4000), 4096, 3)
    requests = list(generate(shape))
    assert any(p == 4095 for _, p, _ in requests)
    assert any(p + o == 4096 for _, p, o in requests)
