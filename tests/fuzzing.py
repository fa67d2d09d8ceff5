"""What the seeded fuzz tests share: how many examples (60 in CI; MLINFRA_FUZZ_EXAMPLES for a longer run) and
hypothesis's settings for tests that run the real CLI (deterministic, no deadline on a slow machine)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

EXAMPLES = int(os.environ.get("MLINFRA_FUZZ_EXAMPLES", "60"))

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    derandomize=True,
)
