"""Numbers a command takes (pure): finite, positive, and no more than what a run can use."""

from __future__ import annotations

import math

from infra.core.errors import Problem


def positive_within(flag: str, value: float, most: float) -> Problem | None:
    """Why `value` of `flag` is not a finite positive number of at most `most`, or None."""
    if not (math.isfinite(value) and value > 0):
        return Problem(flag, f"{value:g} must be a positive number")
    if value > most:
        return Problem(flag, f"{value:g} is more than {most:,.0f}")
    return None
