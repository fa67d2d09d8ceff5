"""The graph as Graphviz DOT, and DOT rendered to SVG or PNG by Graphviz's `dot`."""

from __future__ import annotations

import html
import shutil
import subprocess
from pathlib import Path

from infra.core.errors import InputError, Problem
from infra.tools.diagram.graph import Graph

FORMATS = ("svg", "png", "dot")
RANK_HINT = "rank=same;"
FILL = {"registry": "#fff4df", "training": "#e8f0ff", "serving": "#e7f6ec"}
BORDER = {"registry": "#c98a1b", "training": "#3b6fd4", "serving": "#2e8b57"}
EDGE_STYLE = {
    "writes": 'color="#3b6fd4", penwidth=2, fontcolor="#3b6fd4"',
    "reads": 'color="#2e8b57", penwidth=2, fontcolor="#2e8b57"',
    "both": 'color="#3b6fd4:#2e8b57", dir=both, penwidth=1.5, fontcolor="#333333"',
    "depends": 'color="#b0b0b0", style=dashed, arrowsize=0.6',
    "contains": 'color="#9a9a9a", style=dotted, arrowhead=odiamond',
}


def to_dot(graph: Graph, title: str = "mlinfra stacks") -> str:
    lines = [
        "digraph mlinfra {",
        f'  graph [rankdir=TB, newrank=true, fontname="Helvetica", fontsize=12, nodesep=0.25, ranksep=1.1, labelloc=t, '
        f"label={_q(title)}];",
        '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=9];',
    ]
    # Left to right as data flows through the bridge: training, then the registry, then serving.
    order = {"training": 0, "registry": 1, "serving": 2}
    clusters = sorted(graph.clusters, key=lambda c: (order.get(c.kind, 3), c.stack))
    for i, cluster in enumerate(clusters):
        caption = f'<BR/><FONT POINT-SIZE="10">{_h(cluster.caption)}</FONT>' if cluster.caption else ""
        lines += [
            f"  subgraph cluster_{i} {{",
            f"    label=<<B>{_h(cluster.stack)}</B> ({_h(cluster.kind or 'stack')}){caption}>;",
            f'    labelloc=b; style="rounded,filled"; fillcolor="{FILL.get(cluster.kind, "#f4f4f4")}"; '
            f'color="{BORDER.get(cluster.kind, "#888888")}";',
        ]
        for node in cluster.nodes:
            label = f'<<B>{_h(node.title)}</B><BR/>{_h(node.name)}<BR/><FONT POINT-SIZE="8">{_h(node.detail)}</FONT>>'
            lines.append(f"    {_q(node.id)} [label={label}];")
        lines.append("  }")
    # A stack that writes to the registry and also reads from it is laid out before the registry: its reads
    # do not pull it after the registry (left to right: training, registry, serving).
    writers = {e.src.split("/", 1)[0] for e in graph.edges if e.kind in ("writes", "both")}
    for edge in graph.edges:
        label = f", label={_q(edge.label)}" if edge.label else ""
        loose = ", constraint=false" if edge.kind == "reads" and edge.dst.split("/", 1)[0] in writers else ""
        lines.append(f"  {_q(edge.src)} -> {_q(edge.dst)} [{EDGE_STYLE[edge.kind]}{label}{loose}];")
    # The registry and the components that use it share a rank, so the bridge reads left to right.
    bridged = sorted({n for e in graph.edges if e.kind in ("writes", "reads", "both") for n in (e.src, e.dst)})
    if bridged:
        lines.append("  { " + RANK_HINT + " " + " ".join(_q(n) for n in bridged) + "; }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write(dot_text: str, out: Path) -> None:
    """Write `dot_text` to `out` as DOT, SVG or PNG (by its suffix); InputError names --out on any problem."""
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise InputError(Problem("--out", f"{out.name!r} must end in {', '.join('.' + f for f in FORMATS)}"))
    if not out.parent.is_dir():
        raise InputError(Problem("--out", f"directory {str(out.parent)!r} does not exist"))
    if fmt == "dot":
        out.write_text(dot_text, encoding="utf-8")
        return
    dot = shutil.which("dot")
    if dot is None:
        raise InputError(
            Problem(
                "--out",
                f".{fmt} needs Graphviz's `dot` (apt-get install graphviz, brew install "
                "graphviz); .dot is written without it",
            )
        )
    done = _render(dot, fmt, out, dot_text)
    if done.returncode != 0 and b"trouble in init_rank" in done.stderr:
        # Graphviz 2.43 (Debian and Ubuntu's package) fails on some orders of a cross-cluster `rank=same` under
        # `newrank` (fixed in later releases); the shared rank is a layout hint only, so draw without it.
        done = _render(dot, fmt, out, "".join(line for line in dot_text.splitlines(True) if RANK_HINT not in line))
    if done.returncode != 0:
        raise RuntimeError(f"dot failed: {done.stderr.decode(errors='replace').strip()}")


def _render(dot: str, fmt: str, out: Path, dot_text: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [dot, f"-T{fmt}", "-o", str(out)], input=dot_text.encode("utf-8"), capture_output=True, check=False
    )


def _q(text: str) -> str:
    """A DOT double-quoted string (newlines become centred line breaks)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _h(text: str) -> str:
    return html.escape(text, quote=False)
