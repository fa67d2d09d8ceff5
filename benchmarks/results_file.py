"""benchmarks/RESULTS.md: one section per benchmark, each under its own top-level heading, rewritten in place."""

from __future__ import annotations

from pathlib import Path


def replace_section(document: str, heading: str, section: str) -> str:
    """`document` with the section under `heading` (up to the next top-level heading) set to `section`, else the
    section appended; the other sections are kept as they are, in their order."""
    parts = document.split("\n# ")
    kept = [p if i == 0 else "# " + p for i, p in enumerate(parts)]
    kept = [p.strip("\n") + "\n" for p in kept if p.strip()]
    found = [i for i, p in enumerate(kept) if p.startswith(heading)]
    if found:
        kept[found[0]] = section.strip("\n") + "\n"
    else:
        kept.append(section.strip("\n") + "\n")
    return "\n".join(kept)


def write_section(path: Path, heading: str, section: str) -> None:
    """Set the section under `heading` of the Markdown file at `path` (created if missing) to `section`."""
    path.write_text(
        replace_section(path.read_text(encoding="utf-8") if path.exists() else "", heading, section), encoding="utf-8"
    )


def publish(lines: list[str], heading: str, out: Path | None) -> None:
    """Print a benchmark's section (its lines) and, with `out`, set it in that results file."""
    section = "\n".join(lines) + "\n"
    print(section)
    if out:
        write_section(out, heading, section)
