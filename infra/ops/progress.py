"""The live progress of a run: node-hours integrated over time, cost so far, and one status line.

On a terminal the status is one line redrawn in place (`\\r`); in a pipe or CI (CI=true) it is a plain
line at each phase change and every few minutes, so logs stay readable.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from infra.ops.runtime import Runtime, span

PLAIN_EVERY = timedelta(minutes=5)


@dataclass(frozen=True)
class Usage:
    """Active nodes integrated over time: each sample's count holds until the next sample."""

    node_hours: float = 0.0
    at: datetime | None = None
    nodes: int = 0

    def sample(self, at: datetime, nodes: int) -> Usage:
        held = max(0.0, (at - self.at).total_seconds()) if self.at else 0.0
        return Usage(self.node_hours + self.nodes * held / 3600, at, nodes)

    def cost(self, price_per_node_hour: float | None) -> float | None:
        return None if price_per_node_hour is None else self.node_hours * price_per_node_hour


def status_text(phase: str, elapsed: timedelta, usage: Usage, price: float | None) -> str:
    """`training | 1h 02m | 4 nodes | 4.13 node-h | $90.70 so far`."""
    cost = usage.cost(price)
    money = "cost n/a (no public price)" if cost is None else f"${cost:,.2f} so far"
    return (
        f"{phase} | {span(elapsed)} | {usage.nodes} node{'' if usage.nodes == 1 else 's'} | "
        f"{usage.node_hours:.2f} node-h | {money}"
    )


def summary_text(elapsed: timedelta, usage: Usage, price: float | None) -> str:
    """`1h 02m, 4.00 node-h, about $87.84 at the on-demand list price`."""
    cost = usage.cost(price)
    money = "no public price to cost it" if cost is None else f"about ${cost:,.2f} at the on-demand list price"
    return f"{span(elapsed)}, {usage.node_hours:.2f} node-h, {money}"


class StatusLine:
    """One status line: redrawn in place when live, else printed on change of phase and periodically."""

    def __init__(self, rt: Runtime, every: timedelta = PLAIN_EVERY):
        self._rt, self._every = rt, every
        self._width = 0  # characters of the status currently drawn (live)
        self._printed: datetime | None = None
        self._phase: str | None = None

    def show(self, phase: str, text: str) -> None:
        changed, self._phase = phase != self._phase, phase
        if self._rt.live:
            self._rt.stream.write("\r" + text.ljust(self._width))
            self._rt.stream.flush()
            self._width = max(self._width, len(text))
            return
        now = self._rt.now()
        if changed or self._printed is None or now - self._printed >= self._every:
            self._rt.say(text)
            self._printed = now

    def line(self, text: str) -> None:
        """A line that stays; a live status is erased first and comes back with the next `show`."""
        if self._rt.live and self._width:
            self._rt.stream.write("\r" + " " * self._width + "\r")
            self._width = 0
        self._rt.say(text)

    def end(self) -> None:
        if self._rt.live and self._width:
            self._rt.stream.write("\n")
            self._rt.stream.flush()
            self._width = 0
