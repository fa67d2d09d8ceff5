"""Which twin runs: the modules compiled by mypyc (`python -m infra.serving.twin.build`) or their Python source.

The same source is both: the build compiles the hot modules below into C extensions beside them
(`replica.cpython-311-x86_64-linux-gnu.so` next to `replica.py`, and one shared library
`_compiled__mypyc...so`) and records, in `_compiled.json`, a hash of each module's source and the Python it
was built for. Python's import system prefers an extension to a `.py` of the same name, so this module, run by
the package's `__init__` before any of them is imported, decides once per process:

- **compiled** when the record is there, was made for this Python, names extensions that are present and
  every source still has the hash it was built from;
- **python** otherwise (never built, no compiler, built for another Python, a source changed since the build,
  or `MLINFRA_TWIN_PURE=1`), and then a finder placed first on `sys.meta_path` loads those modules from their
  `.py` files, so a stale extension is never used, silently or otherwise.

All the compiled modules or none: they call each other natively, so a mix is never loaded. `ENGINE` and
`REASON` say which and why (`simulate` prints them). Pure: reads files, never builds.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType

PACKAGE = "infra.serving.twin"
# The modules on the hot path (docs/simulate.md, "Speed"), in the order they import one another.
MODULES = ("hpa", "keda", "replica", "engine", "traces")
GROUP = "_compiled"  # the shared library: infra.serving.twin._compiled__mypyc
RECORD = "_compiled.json"
FORCE_PURE = "MLINFRA_TWIN_PURE"
HERE = Path(__file__).resolve().parent


def source_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def extension_suffix() -> str:
    return importlib.machinery.EXTENSION_SUFFIXES[0]


def extensions(directory: Path) -> list[Path]:
    """The compiled files in `directory`: the modules' and the shared library's."""
    names = [*MODULES, GROUP + "__mypyc"]
    return [p for n in names for p in directory.glob(n + ".*") if p.suffix in (".so", ".pyd")]


def decide(directory: Path, environ: Mapping[str, str]) -> tuple[str, str]:
    """("compiled" or "python", why) for the twin's modules in `directory`."""
    if environ.get(FORCE_PURE, "") not in ("", "0"):
        return "python", f"{FORCE_PURE}={environ[FORCE_PURE]}"
    record_path = directory / RECORD
    if not record_path.is_file():
        if extensions(directory):
            return "python", f"compiled files without {RECORD}: rebuild with python -m {PACKAGE}.build"
        return "python", f"not compiled (python -m {PACKAGE}.build compiles it)"
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
        suffix, sources = str(record["suffix"]), dict(record["sources"])
    except (ValueError, KeyError, TypeError):
        return "python", f"{RECORD} is unreadable: rebuild with python -m {PACKAGE}.build"
    if suffix != extension_suffix():
        return "python", f"compiled for {suffix}, this Python loads {extension_suffix()}"
    for name in (*MODULES, GROUP + "__mypyc"):
        if not (directory / (name + suffix)).is_file():
            return "python", f"{name}{suffix} is missing: rebuild with python -m {PACKAGE}.build"
    for name in MODULES:
        source = directory / (name + ".py")
        if sources.get(name) != source_hash(source):
            return "python", f"{name}.py changed since it was compiled: rebuild with python -m {PACKAGE}.build"
    return "compiled", f"mypyc {record.get('mypy', '?')}"


class SourceFirst(importlib.abc.MetaPathFinder):
    """Loads the twin's hot modules from their `.py` even where an extension of the same name sits beside it."""

    def __init__(self, directory: Path):
        self.directory = directory

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != PACKAGE or name not in MODULES:
            return None
        return importlib.util.spec_from_file_location(fullname, self.directory / (name + ".py"))


def select() -> tuple[str, str]:
    engine, reason = decide(HERE, os.environ)
    if engine == "python" and not any(isinstance(f, SourceFirst) for f in sys.meta_path):
        sys.meta_path.insert(0, SourceFirst(HERE))
    return engine, reason


ENGINE, REASON = select()


def describe() -> str:
    """One line for the CLI: which twin ran, and why."""
    return f"{ENGINE} ({REASON})"
