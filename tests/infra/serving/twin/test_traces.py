"""Trace shapes (their mean rate, their seed) and request-log replay with exact messages for bad lines."""

from __future__ import annotations

import time

import pytest

from infra.serving.queueing import Lengths
from infra.serving.twin.traces import SHAPES, Shape, TraceError, generate, parse_log

HEADER = "timestamp,prompt_tokens,output_tokens\n"


def _shape(name: str, seed: int = 0, seconds: float = 86400.0) -> Shape:
    return Shape(name, 2.0, seconds, Lengths(512, 1536), Lengths(256, 768), 4096, seed)


@pytest.mark.parametrize("name", SHAPES)
def test_each_shape_keeps_its_mean_rate(name):
    requests = list(generate(_shape(name)))
    assert len(requests) / 86400 == pytest.approx(2.0, rel=0.03)
    assert all(a[0] <= b[0] for a, b in zip(requests, requests[1:], strict=False))
    assert all(1 <= p and 1 <= o and p + o <= 4096 for _, p, o in requests)


def test_token_lengths_follow_mean_and_p95():
    requests = list(generate(_shape("steady", seconds=20000)))
    outputs = sorted(o for _, _, o in requests)
    assert sum(outputs) / len(outputs) == pytest.approx(256, rel=0.05)
    assert outputs[int(0.95 * len(outputs))] == pytest.approx(768, rel=0.08)


def test_diurnal_peaks_in_the_afternoon():
    requests = list(generate(_shape("diurnal")))
    night = sum(1 for t, _, _ in requests if 3 * 3600 <= t < 5 * 3600)
    afternoon = sum(1 for t, _, _ in requests if 15 * 3600 <= t < 17 * 3600)
    assert afternoon > 5 * night


def test_a_seed_fixes_the_trace():
    assert list(generate(_shape("burst", 4, 3600))) == list(generate(_shape("burst", 4, 3600)))
    assert list(generate(_shape("burst", 4, 3600))) != list(generate(_shape("burst", 5, 3600)))


def test_csv_and_json_lines_replay_from_the_first_request():
    csv_text = "timestamp,prompt_tokens,output_tokens\n100.5,10,20\n100,5,7\n"
    assert parse_log(csv_text) == [(0.0, 5, 7), (0.5, 10, 20)]
    jsonl = '{"timestamp": "2026-11-27T10:00:00Z", "prompt_tokens": 3, "output_tokens": 4}\n' + (
        '{"timestamp": "2026-11-27T10:00:02Z", "prompt_tokens": 1, "output_tokens": 1}\n'
    )
    assert parse_log(jsonl) == [(0.0, 3, 4), (2.0, 1, 1)]


def test_a_timestamp_without_a_zone_is_utc_whatever_the_machines_zone(monkeypatch):
    # 01:30 and 03:30 on the night Berlin moves its clocks forward: two hours apart in UTC, one in Berlin's time.
    log = HEADER + "2026-03-29T01:30:00,1,1\n2026-03-29T03:30:00+00:00,1,1\n2026-03-29T03:30:00,1,1\n"
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    try:
        berlin = parse_log(log)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert berlin == parse_log(log) == [(0.0, 1, 1), (7200.0, 1, 1), (7200.0, 1, 1)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("time,prompt_tokens\n1,2\n", "log:1: the header needs the columns timestamp, prompt_tokens, output_tokens "
         "(missing timestamp, output_tokens)"),
        (HEADER + "soon,1,1\n", "log:2: timestamp 'soon' is neither seconds nor ISO-8601"),
        (HEADER + "1,1.5,1\n", "log:2: prompt_tokens '1.5' is not a whole number of tokens"),
        (HEADER + "1,1,0\n", "log:2: output_tokens 0 must be at least 1"),
        ('{"timestamp": 1}\n', "log:1: needs the keys timestamp, prompt_tokens, output_tokens"),
        ("{nope\n", "log:1: not a JSON object (Expecting property name enclosed in double quotes)"),
        (HEADER, "log: no requests"),
    ],
)  # fmt: skip
def test_bad_logs_name_the_line_and_field(text, message):
    with pytest.raises(TraceError) as error:
        parse_log(text, "log")
    assert str(error.value) == message
