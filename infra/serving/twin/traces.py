"""Request traces for the twin (pure): built-in shapes drawn with a seed, or a replayed request log.

A trace is a sequence of (arrival seconds, prompt tokens, output tokens), arrivals non-decreasing.

- **Shapes.** Arrivals are a Poisson process whose rate follows the shape over time (a unit-rate process
  mapped through the inverse of the cumulative rate): `steady` (the mean rate throughout), `diurnal` (a day's
  sine between 20% and 180% of the mean, lowest at 04:00, highest at 16:00), `burst` (10x the mean for one
  minute every 20 minutes, the rest lower so that the mean holds), `ramp` (from 10% to 190% of the mean,
  linearly), `office` (weekdays from 07:00 to 20:00 at 24/13 of the mean, so that a weekday's mean holds, and
  nothing at night or at weekends; the trace starts on a Monday at 00:00). Token lengths are lognormal through a
  mean and a p95 (the same parameterisation as queueing.Lengths), at least 1, at most the context left.
- **Replay.** A CSV with a header naming `timestamp`, `prompt_tokens` and `output_tokens`, or JSON lines with
  those keys; timestamps are seconds (any origin; the trace starts at the first) or ISO-8601.
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from infra.serving.queueing import Z95, Lengths

SHAPES = ("steady", "diurnal", "burst", "ramp", "office")
OFFICE_HOURS = (7 * 3600.0, 20 * 3600.0)  # seconds of the day the office shape has traffic in
FIELDS = ("timestamp", "prompt_tokens", "output_tokens")


class TraceError(ValueError):
    """A request log the twin cannot read; the message names the line and the field."""


@dataclass(frozen=True)
class Shape:
    name: str
    mean_rate: float  # requests per second, averaged over the trace
    seconds: float
    prompt: Lengths
    output: Lengths
    max_tokens: int  # prompt + output at most (the served maxModelLen)
    seed: int = 0

    def rate(self, t: float) -> float:
        """The arrival rate at time t (requests per second)."""
        mean = self.mean_rate
        if self.name == "steady":
            return mean
        if self.name == "diurnal":
            return mean * (1 + 0.8 * math.sin(2 * math.pi * (t / 86400 - 10 / 24)))
        if self.name == "burst":
            return mean * 10 if t % 1200 < 60 else mean * 600 / 1140  # 1 min at 10x, the rest keeps the mean
        if self.name == "office":
            start, end = OFFICE_HOURS
            weekday = (t // 86400) % 7 < 5
            return mean * 86400 / (end - start) if weekday and start <= t % 86400 < end else 0.0
        return mean * (0.1 + 1.8 * min(1.0, t / self.seconds))


def _sigma(lengths: Lengths) -> float:
    """The lognormal's sigma through mean and p95 (0 when fixed)."""
    if lengths.p95 <= lengths.mean:
        return 0.0
    gap = math.log(lengths.p95 / lengths.mean)
    disc = Z95**2 - 2 * gap
    return Z95 - math.sqrt(disc) if disc > 0 else Z95


def generate(shape: Shape) -> Iterator[tuple[float, int, int]]:
    """The shape's requests, in order of arrival, the same for the same seed."""
    if shape.name not in SHAPES:
        raise ValueError(f"{shape.name!r} is not a trace shape; one of {', '.join(SHAPES)}")
    rng = random.Random(shape.seed)
    end = shape.seconds
    # Time rescaling: a unit-rate Poisson process mapped through the inverse of the cumulative rate, the rate
    # taken once per second (the shapes change over minutes). No draw is thrown away, whatever the shape.
    rates = [shape.rate(second + 0.5) for second in range(math.ceil(end) + 1)]
    ps, os_ = _sigma(shape.prompt), _sigma(shape.output)
    pmu, omu = math.log(shape.prompt.mean) - ps * ps / 2, math.log(shape.output.mean) - os_ * os_ / 2
    fixed_prompt, fixed_out = round(shape.prompt.mean), round(shape.output.mean)
    cap = shape.max_tokens
    if ps and os_:
        yield from _both_lognormal(rng, rates, end, pmu, ps, omu, os_, cap)
        return
    expo, gauss, exp = rng.expovariate, rng.gauss, math.exp
    second, rate, floor = 0, rates[0], 0.0  # the current second, its rate, the cumulative rate at its start
    last = len(rates) - 1
    s = 0.0
    while True:
        s += expo(1.0)
        while s >= floor + rate:
            floor += rate
            second += 1
            if second > last:
                return
            rate = rates[second]
        t = second + (s - floor) / rate
        if t >= end:
            return
        prompt = round(exp(pmu + ps * gauss())) if ps else fixed_prompt
        prompt = 1 if prompt < 1 else cap - 1 if prompt > cap - 1 else prompt
        out = round(exp(omu + os_ * gauss())) if os_ else fixed_out
        out = 1 if out < 1 else cap - prompt if out > cap - prompt else out
        yield t, prompt, out


def _both_lognormal(
    rng: random.Random, rates: list[float], end: float, pmu: float, ps: float, omu: float, os_: float, cap: int
) -> Iterator[tuple[float, int, int]]:
    """generate()'s loop when both lengths vary (the common case), the same draws in the same order, inlined.

    Per request the loop above calls expovariate(1.0) (-log(1 - random())) and gauss() twice; gauss draws its
    normals in pairs (Box-Muller: cos and sin of one angle and radius), so with two calls per request the first
    draws a pair and the second takes its other half. Written out here to save three method calls per request
    (CPython's random.py, 3.11 to 3.13; tests/infra/serving/twin/test_traces_speed.py compares both against the
    library's methods). math's functions are called through the module, not bound to locals: compiled by mypyc
    (accel.py) such a call is a C call, a local alias a Python one (the draw 1.5 times as fast compiled; from the
    source, the lookups cost about a tenth more)."""
    uniform = rng.random
    two_pi = 2.0 * math.pi
    second, rate, floor = 0, rates[0], 0.0
    last = len(rates) - 1
    s = 0.0
    top = cap - 1
    while True:
        s += -math.log(1.0 - uniform())
        while s >= floor + rate:
            floor += rate
            second += 1
            if second > last:
                return
            rate = rates[second]
        t = second + (s - floor) / rate
        if t >= end:
            return
        angle = uniform() * two_pi
        radius = math.sqrt(-2.0 * math.log(1.0 - uniform()))
        prompt = round(math.exp(pmu + ps * (math.cos(angle) * radius)))
        prompt = 1 if prompt < 1 else top if prompt > top else prompt
        out = round(math.exp(omu + os_ * (math.sin(angle) * radius)))
        out = 1 if out < 1 else cap - prompt if out > cap - prompt else out
        yield t, prompt, out


def _seconds(value: str, where: str) -> float:
    try:
        return float(value)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as error:
        raise TraceError(f"{where}: timestamp {value!r} is neither seconds nor ISO-8601") from error
    # A time without a zone is UTC, not this machine's local time: the same log replays the same anywhere, and
    # a daylight-saving change inside it does not move its requests by an hour.
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _tokens(value: object, key: str, where: str) -> int:
    try:
        number = int(str(value))
    except ValueError as error:
        raise TraceError(f"{where}: {key} {value!r} is not a whole number of tokens") from error
    if number < (0 if key == "prompt_tokens" else 1):
        raise TraceError(f"{where}: {key} {number} must be at least {0 if key == 'prompt_tokens' else 1}")
    return number


def parse_log(text: str, name: str = "trace") -> list[tuple[float, int, int]]:
    """A request log (CSV with a header, or JSON lines) as a trace starting at 0, sorted by arrival."""
    rows: list[tuple[float, int, int]] = []
    stripped = text.lstrip()
    if stripped.startswith("{"):
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            where = f"{name}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise TraceError(f"{where}: not a JSON object ({error.msg})") from error
            if not isinstance(record, dict) or any(k not in record for k in FIELDS):
                raise TraceError(f"{where}: needs the keys {', '.join(FIELDS)}")
            rows.append(
                (
                    _seconds(str(record["timestamp"]), where),
                    _tokens(record["prompt_tokens"], "prompt_tokens", where),
                    _tokens(record["output_tokens"], "output_tokens", where),
                )
            )
    else:
        reader = csv.DictReader(io.StringIO(text))
        missing = [k for k in FIELDS if k not in (reader.fieldnames or [])]
        if missing:
            raise TraceError(
                f"{name}:1: the header needs the columns {', '.join(FIELDS)} (missing {', '.join(missing)})"
            )
        for number, record in enumerate(reader, 2):
            where = f"{name}:{number}"
            rows.append(
                (
                    _seconds(record["timestamp"] or "", where),
                    _tokens(record["prompt_tokens"], "prompt_tokens", where),
                    _tokens(record["output_tokens"], "output_tokens", where),
                )
            )
    if not rows:
        raise TraceError(f"{name}: no requests")
    rows.sort(key=lambda r: r[0])
    origin = rows[0][0]
    return [(t - origin, p, o) for t, p, o in rows]


def load_log(path: Path) -> list[tuple[float, int, int]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise TraceError(f"{path}: {error.strerror or error}") from error
    return parse_log(text, str(path))
