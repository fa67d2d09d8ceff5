"""The twin's replicas and nodes over time as an SVG (pure, no plotting library): one panel per model, desired and
ready replicas and nodes as step lines, time in hours along the bottom."""

from __future__ import annotations

from html import escape

from infra.serving.twin.engine import Outcome

WIDTH, PANEL, LEFT, TOP = 760, 170, 50, 24
COLOURS = {"desired replicas": "#1f77b4", "ready replicas": "#2ca02c", "nodes": "#d62728"}


def _panel(outcome: Outcome, top: float) -> list[str]:
    series = outcome.series
    height = PANEL - 50
    span = max(outcome.seconds, 1.0)
    highest = max([1, *(max(s[1], s[2], s[3]) for s in series)])
    inner = WIDTH - LEFT - 20

    def x(t: float) -> float:
        return LEFT + inner * t / span

    def y(v: float) -> float:
        return top + height - height * v / highest

    parts = [
        f'<text x="{LEFT}" y="{top - 8:.0f}" font-size="13" font-weight="bold">{escape(outcome.twin.model)}</text>',
        f'<line x1="{LEFT}" y1="{y(0):.1f}" x2="{LEFT + inner}" y2="{y(0):.1f}" stroke="#888"/>',
        f'<line x1="{LEFT}" y1="{top:.1f}" x2="{LEFT}" y2="{y(0):.1f}" stroke="#888"/>',
    ]
    for value in sorted({0, highest // 2, highest}):
        parts.append(f'<text x="{LEFT - 6}" y="{y(value) + 4:.1f}" font-size="10" text-anchor="end">{value}</text>')
    hours = span / 3600
    step = 1 if hours <= 12 else 2 if hours <= 24 else 6
    tick = 0
    while tick <= hours + 1e-9:
        parts.append(
            f'<text x="{x(tick * 3600):.1f}" y="{y(0) + 14:.1f}" font-size="10" text-anchor="middle">{tick}h</text>'
        )
        tick += step
    for index, (label, colour) in enumerate(COLOURS.items()):
        points = []
        previous = None
        for sample in series:
            level = sample[index + 1]
            if previous is not None:
                points.append(f"{x(sample[0]):.1f},{y(previous):.1f}")
            points.append(f"{x(sample[0]):.1f},{y(level):.1f}")
            previous = level
        if points:
            dash = ' stroke-dasharray="4 3"' if label == "desired replicas" else ""
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="1.5"{dash} points="{" ".join(points)}"/>'
            )
        parts.append(
            f'<text x="{LEFT + 10 + index * 150}" y="{y(0) + 30:.1f}" font-size="11" fill="{colour}">{label}</text>'
        )
    return parts


def svg(outcomes: list[Outcome], title: str) -> str:
    """The picture of every model's run, one panel each."""
    height = TOP + 30 + PANEL * len(outcomes)  # each panel: plot, hour labels, legend
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        f'<text x="10" y="16" font-size="14">{escape(title)}</text>',
    ]
    for i, outcome in enumerate(outcomes):
        parts += _panel(outcome, TOP + 30 + i * PANEL)
    return "\n".join([*parts, "</svg>"]) + "\n"
