"""Compile the twin's hot modules with mypyc, in place: `python -m infra.serving.twin.build [--require] [--clean]`.

The optional accelerated twin (accel.py, docs/simulate.md "Speed"). mypyc (with mypy, in the dev extra) turns the
modules of accel.MODULES into C extensions, which a C compiler and the Python headers build; they are written
beside their sources with `_compiled.json`, the hash of each source they were built from (git ignores all of
them). Without a compiler, mypyc or the headers this says so in one line and exits 0, and the twin runs from its
source; `--require` (CI) makes that exit 1, as it does a failed build. The old build is removed before
compiling, so a failed build leaves the pure twin, never a stale one. `--clean` only removes it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from infra.serving.twin.accel import GROUP, HERE, MODULES, PACKAGE, RECORD, extension_suffix, extensions, source_hash

ROOT = HERE.parents[2]  # the checkout: mypy reads the project's configuration (pyproject.toml) from it

SETUP = """\
from setuptools import setup
from mypyc.build import mypycify

setup(name="mlinfra-twin", ext_modules=mypycify({paths!r}, group_name={group!r}, target_dir="c", opt_level="3"))
"""


def missing() -> str | None:
    """What the build lacks on this machine, or None."""
    if importlib.util.find_spec("mypyc") is None:
        return "mypyc is not installed (pip install -e '.[dev]')"
    compiler = shlex.split(str(sysconfig.get_config_var("CC") or "cc"))[:1]
    if not compiler or shutil.which(compiler[0]) is None:
        return f"no C compiler ({compiler[0] if compiler else 'CC'} not found)"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        return f"no Python headers (Python.h not in {sysconfig.get_paths()['include']})"
    return None


def clean() -> None:
    (HERE / RECORD).unlink(missing_ok=True)
    for path in extensions(HERE):
        path.unlink()


def _cflags() -> str:
    """The caller's CFLAGS, with a * b + c never fused into one rounding: an -march that has FMA (x86-64-v3,
    native) would otherwise let GCC fuse them, and the compiled twin would differ from its source in the last bit."""
    return f"{os.environ.get('CFLAGS', '')} -ffp-contract=off".strip()


def build() -> str | None:
    """Compile in a temporary directory, copy the extensions in and write the record; the error, or None."""
    sources = {name: source_hash(HERE / f"{name}.py") for name in MODULES}
    suffix = extension_suffix()
    with tempfile.TemporaryDirectory(prefix="twin-build-") as tmp:
        paths = [f"--config-file={ROOT / 'pyproject.toml'}", *(str(HERE / f"{name}.py") for name in MODULES)]
        setup = SETUP.format(paths=paths, group=f"{PACKAGE}.{GROUP}")
        Path(tmp, "setup.py").write_text(setup, encoding="utf-8")
        done = subprocess.run(
            [sys.executable, "setup.py", "build_ext", "--build-lib", "lib"],
            cwd=tmp, capture_output=True, text=True, check=False,
            env={**os.environ, "MYPY_CACHE_DIR": str(Path(tmp, "mypy-cache")), "CFLAGS": _cflags()},
        )  # fmt: skip
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
            return "mypyc failed:\n" + "\n".join(tail)
        built = Path(tmp, "lib", *PACKAGE.split("."))
        names = [*MODULES, GROUP + "__mypyc"]
        absent = [n for n in names if not (built / (n + suffix)).is_file()]
        if absent:
            return f"mypyc built no {', '.join(n + suffix for n in absent)}"
        if any(source_hash(HERE / f"{name}.py") != sources[name] for name in MODULES):
            return "a source changed during the build: build again"
        for name in names:
            shutil.copyfile(built / (name + suffix), HERE / (name + suffix))
    import mypy.version

    record = {"suffix": suffix, "python": sys.version.split()[0], "mypy": mypy.version.__version__, "sources": sources}
    (HERE / RECORD).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {PACKAGE}.build", description=__doc__.splitlines()[0])
    parser.add_argument("--require", action="store_true", help="exit 1 where the twin cannot be compiled")
    parser.add_argument("--clean", action="store_true", help="remove the compiled twin and stop")
    args = parser.parse_args(argv)
    if args.clean:
        clean()
        print("twin: compiled modules removed; the twin runs from its source")
        return 0
    problem = missing()
    if problem is None:
        clean()  # first: a failed build leaves the source to run, never the previous build
        problem = build()
    if problem is not None:
        print(f"twin: not compiled, the twin runs from its source: {problem}", file=sys.stderr)
        return 1 if args.require else 0
    print(f"twin: compiled {', '.join(MODULES)} with mypyc into {HERE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
