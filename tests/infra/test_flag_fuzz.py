"""Bounded fuzzing of the numeric flags through the real CLI: a number no run can use (NaN, an infinity, a
negative, a huge one, or text) exits 2 with one line naming the flag, before any preview, run or connection;
never a traceback, an internal error, a hang or a run. A longer run: MLINFRA_FUZZ_EXAMPLES=2000."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.cli import main
from tests.fuzzing import FUZZ

MODEL = "stacks/models/llama-3-8b/config.json"
SIZE = ["size", "--model-config", MODEL, "--rate", "2", "--prompt-tokens", "512", "--output-tokens", "256",
        "--ttft-p95-ms", "2000", "--tpot-p95-ms", "100"]  # fmt: skip
SIMULATE = ["simulate", "--stack", "serving-demo", "--hours", "0.01"]
# (command, flag, whether 0 is a valid value of it)
FLAGS = [
    (SIMULATE, "--rate", False),
    (SIMULATE, "--hours", False),
    (SIMULATE, "--timeout-s", False),
    (SIMULATE, "--ttft-slo-ms", False),
    (SIMULATE, "--tpot-slo-ms", False),
    (SIMULATE, "--spot-interruptions-per-node-hour", True),
    (SIMULATE, "--callers", False),
    (SIZE, "--rate", False),
    (SIZE, "--ttft-p95-ms", False),
    (SIZE, "--tpot-p95-ms", False),
    (SIZE, "--max-replicas", False),
    (SIZE, "--top", False),
    (SIZE, "--max-model-len", False),
    (["cost", "--stack", "serving-demo"], "--hours", False),
    (["report", "--stack", "serving-demo"], "--hours", False),
    (["smoke", "--stack", "serving-demo"], "--timeout", False),
]
OUTCOMES: Counter[str] = Counter()
NAMED = re.compile(r"^(?:error: --[a-z0-9-]+: |python -m infra [a-z]+: error: argument --[a-z0-9-]+: )")

UNUSABLE = st.one_of(
    st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1e400", "", " ", "0x10", "1_0e", "½"]),
    st.floats(max_value=-1e-9, allow_nan=False, allow_infinity=False).map(repr),  # negatives
    st.floats(min_value=1e13, allow_nan=False, allow_infinity=False).map(repr),  # beyond any bound
    st.integers(max_value=-1).map(str),
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=12).filter(
        lambda t: not _number(t)
    ),
)


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@FUZZ
@given(target=st.sampled_from(FLAGS), value=UNUSABLE, zero=st.booleans())
def test_an_unusable_number_exits_2_naming_the_flag(target, value, zero, capsys, monkeypatch):
    command, flag, zero_valid = target
    if zero and not zero_valid:
        value = "0"
    monkeypatch.setenv("MLINFRA_API_KEY", "fuzz")  # smoke: the flags are checked first, nothing is dialled
    try:
        code = main([*command, f"{flag}={value}"])
    except SystemExit as stop:  # argparse's own refusal of a value that is not a number of its type
        code = stop.code
    err = capsys.readouterr().err
    OUTCOMES[f"exit {code}"] += 1
    assert code == 2, err
    assert "Traceback" not in err and "internal error" not in err
    lines = [line for line in err.splitlines() if "error: " in line]
    assert lines and NAMED.match(lines[-1]), err


@pytest.fixture(scope="module", autouse=True)
def report_outcomes():
    yield
    if OUTCOMES:
        print(f"\nfuzzed numeric flags by outcome: {dict(sorted(OUTCOMES.items()))}")
