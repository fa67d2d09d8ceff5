"""The optional compiled twin (accel.py, build.py): which one runs and why, a stale build never used, and the
compiled and the pure twin giving the same figures bit for bit.

The comparison needs the compiled twin (`python -m infra.serving.twin.build`); where it is not built the test is
skipped, unless MLINFRA_TWIN_REQUIRE_COMPILED=1 (CI's `.ci/run` builds it and sets this), where it fails."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import infra.serving.twin as twin_package
from infra.serving.twin import accel, engine, replica
from infra.serving.twin.accel import GROUP, MODULES, RECORD, SourceFirst, decide, extension_suffix, source_hash
from tests.helpers import ROOT

SUFFIX = extension_suffix()
BUILD = "rebuild with python -m infra.serving.twin.build"


def _built(directory: Path, **record: object) -> None:
    """A directory as the build leaves it: sources, extensions (their content does not matter here), record."""
    for name in MODULES:
        (directory / f"{name}.py").write_text(f"# {name}\n", encoding="utf-8")
        (directory / f"{name}{SUFFIX}").write_bytes(b"\x7fELF")
    (directory / f"{GROUP}__mypyc{SUFFIX}").write_bytes(b"\x7fELF")
    sources = {name: source_hash(directory / f"{name}.py") for name in MODULES}
    body = {"suffix": SUFFIX, "python": "3.11.7", "mypy": "2.4.1", "sources": sources, **record}
    (directory / RECORD).write_text(json.dumps(body), encoding="utf-8")


def test_a_complete_build_of_the_current_sources_runs_compiled(tmp_path):
    _built(tmp_path)
    assert decide(tmp_path, {}) == ("compiled", "mypyc 2.4.1")


def test_a_source_changed_since_the_build_runs_the_source(tmp_path):
    _built(tmp_path)
    (tmp_path / "replica.py").write_text("# replica, changed\n", encoding="utf-8")
    assert decide(tmp_path, {}) == ("python", f"replica.py changed since it was compiled: {BUILD}")


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda d: (d / RECORD).unlink(), f"compiled files without {RECORD}: {BUILD}"),
        (lambda d: (d / RECORD).write_text("{", encoding="utf-8"), f"{RECORD} is unreadable: {BUILD}"),
        (lambda d: (d / f"engine{SUFFIX}").unlink(), f"engine{SUFFIX} is missing: {BUILD}"),
        (lambda d: (d / f"{GROUP}__mypyc{SUFFIX}").unlink(), f"{GROUP}__mypyc{SUFFIX} is missing: {BUILD}"),
    ],
)
def test_an_incomplete_build_runs_the_source(tmp_path, change, reason):
    _built(tmp_path)
    change(tmp_path)
    assert decide(tmp_path, {}) == ("python", reason)


def test_a_build_for_another_python_and_no_build_run_the_source(tmp_path):
    other = ".cpython-39-x86_64-linux-gnu.so" if ".cpython-39-" not in SUFFIX else ".cpython-313-x86_64-linux-gnu.so"
    _built(tmp_path, suffix=other)
    assert decide(tmp_path, {}) == ("python", f"compiled for {other}, this Python loads {SUFFIX}")
    for path in tmp_path.iterdir():
        if path.suffix != ".py":
            path.unlink()
    assert decide(tmp_path, {}) == ("python", "not compiled (python -m infra.serving.twin.build compiles it)")


def test_the_environment_forces_the_source(tmp_path):
    _built(tmp_path)
    assert decide(tmp_path, {"MLINFRA_TWIN_PURE": "1"}) == ("python", "MLINFRA_TWIN_PURE=1")
    assert decide(tmp_path, {"MLINFRA_TWIN_PURE": "0"})[0] == "compiled"


def test_the_finder_loads_the_hot_modules_from_their_source_only():
    finder = SourceFirst(accel.HERE)
    spec = finder.find_spec("infra.serving.twin.replica", None)
    assert spec is not None and spec.origin == str(accel.HERE / "replica.py")
    assert finder.find_spec("infra.serving.twin.figures", None) is None  # never compiled: found as usual
    assert finder.find_spec("other.replica", None) is None


def test_this_process_loaded_what_it_says():
    files = [Path(m.__file__ or "") for m in (engine, replica)]
    if twin_package.ENGINE == "compiled":
        assert all(f.name.endswith(SUFFIX) for f in files), files
    else:
        assert [f.name for f in files] == ["engine.py", "replica.py"]


def _figures(pure: bool) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "MLINFRA_TWIN_PURE"}
    if pure:
        env["MLINFRA_TWIN_PURE"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "tests.infra.serving.twin.engine_figures"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    figures: dict[str, object] = json.loads(done.stdout)
    return figures


def _needs_the_build() -> None:
    if twin_package.ENGINE != "compiled":
        if os.environ.get("MLINFRA_TWIN_REQUIRE_COMPILED") == "1":
            pytest.fail(f"the compiled twin is required here, but the twin runs {accel.describe()}")
        pytest.skip(f"the twin is not compiled: {twin_package.REASON}")


def test_a_copy_of_the_build_with_one_source_changed_loads_every_module_from_source(tmp_path):
    _needs_the_build()
    shutil.copytree(ROOT / "infra", tmp_path / "infra", ignore=shutil.ignore_patterns("__pycache__"))
    probe = (
        "import infra.serving.twin as t\n"
        "from infra.serving.twin import engine, hpa, keda, replica, traces\n"
        "print(t.ENGINE, t.REASON, *(m.__file__.endswith('.py') for m in (engine, hpa, keda, replica, traces)))"
    )

    def loaded() -> str:
        env = {k: v for k, v in os.environ.items() if k != "MLINFRA_TWIN_PURE"}
        done = subprocess.run(
            [sys.executable, "-c", probe], cwd=tmp_path, env={**env, "PYTHONPATH": str(tmp_path)},
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return done.stdout.strip()

    assert (
        loaded()
        == "compiled mypyc " + json.loads((accel.HERE / RECORD).read_text(encoding="utf-8"))["mypy"] + " False" * 5
    )
    with (tmp_path / "infra/serving/twin/hpa.py").open("a", encoding="utf-8") as source:
        source.write("# changed\n")
    stale = "hpa.py changed since it was compiled: rebuild with python -m infra.serving.twin.build"
    assert loaded() == f"python {stale}" + " True" * 5


def test_the_compiled_and_the_pure_twin_give_the_same_figures():
    _needs_the_build()
    compiled, pure = _figures(False), _figures(True)
    assert (compiled.pop("engine"), pure.pop("engine")) == ("compiled", "python")
    compiled_files, pure_files = compiled.pop("files"), pure.pop("files")
    assert isinstance(compiled_files, list) and all(f.endswith(SUFFIX) for f in compiled_files)
    assert isinstance(pure_files, list) and all(f.endswith(".py") for f in pure_files)
    assert len(compiled) == 16  # 2 models x (3 shapes + a replay) x with and without Spot reclaims
    assert compiled == pure


@pytest.mark.parametrize(
    "mypyc, reason",
    [
        (True, "no C compiler (no-such-cc not found)"),
        (False, "mypyc is not installed (pip install -e '.[dev]')"),
    ],
)
def test_without_a_compiler_or_mypyc_the_build_says_so_and_fails_only_when_required(monkeypatch, capsys, mypyc, reason):
    from infra.serving.twin import build

    find_spec = importlib.util.find_spec  # mypyc present or not, whichever extras this machine installed
    monkeypatch.setattr(
        build.importlib.util,
        "find_spec",
        lambda name, *args: (find_spec("json") if mypyc else None) if name == "mypyc" else find_spec(name, *args),
    )
    monkeypatch.setattr(build.sysconfig, "get_config_var", lambda name: "no-such-cc -O2")
    before = sorted(p.name for p in accel.HERE.iterdir())
    assert build.main([]) == 0
    line = f"twin: not compiled, the twin runs from its source: {reason}\n"
    assert capsys.readouterr().err == line
    assert build.main(["--require"]) == 1
    assert capsys.readouterr().err == line
    assert sorted(p.name for p in accel.HERE.iterdir()) == before  # the build in place, if any, is left alone
