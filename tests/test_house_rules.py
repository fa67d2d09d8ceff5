"""House rules a reviewer would otherwise check by hand: no module reaches into another's private names, no
sys.path edits stand in for the import root, component type tokens follow `mlinfra:<domain>:<Noun>`, and files
stay small. (Layering is checked by import-linter: `lint-imports`, configured in pyproject.toml.)"""

from __future__ import annotations

import ast
import re
import subprocess

from tests.helpers import ROOT

OURS = ("infra", "components", "stacks", "policies", "run_guard", "tests")
MAX_LINES = 500


def _python_files(*roots: str) -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", *roots],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [f for f in listed if f.endswith(".py") and (ROOT / f).exists()]


def test_no_module_imports_another_modules_private_names():
    found = []
    for path in _python_files(*OURS):
        for node in ast.walk(ast.parse((ROOT / path).read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in OURS:
                found += [f"{path}: from {node.module} import {a.name}" for a in node.names if a.name.startswith("_")]
    assert found == []


def test_no_sys_path_edits_in_the_project():
    # The offline engine puts the Pulumi program's own directory on the path, as the language host runs it.
    allowed = {"infra/tools/offline/engine.py"}
    found = [
        p
        for p in _python_files(*OURS, "benchmarks")
        if p not in allowed
        and p != "tests/test_house_rules.py"
        and "sys.path.insert" in (ROOT / p).read_text(encoding="utf-8")
    ]
    assert found == []


def test_component_type_tokens_name_their_domain():
    token = re.compile(r'super\(\).__init__\(\s*"(mlinfra:([a-z]+):([A-Z][A-Za-z0-9]+))"')
    wrong = []
    for path in _python_files("components"):
        for full, domain, _ in token.findall((ROOT / path).read_text(encoding="utf-8")):
            if domain != path.split("/")[1]:
                wrong.append(f"{path}: {full}")
    assert wrong == []
    assert len([p for p in _python_files("components") if token.search((ROOT / p).read_text(encoding="utf-8"))]) >= 20


def test_source_files_stay_small():
    big = [
        f"{p}: {n} lines"
        for p in _python_files("infra", "components", "stacks", "policies", "run_guard")
        if (n := len((ROOT / p).read_text(encoding="utf-8").splitlines())) > MAX_LINES
    ]
    assert big == []


NOT_TEXT_OPENERS = {"os", "tarfile", "zipfile", "gzip", "bz2", "lzma", "webbrowser", "socket"}


def _text_mode(call: ast.Call) -> bool:
    """A read_text, write_text or open call in text mode (a mode that is not a literal is taken as binary)."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name in ("read_text", "write_text"):
        return True
    if name != "open":
        return False
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in NOT_TEXT_OPENERS:
        return False
    mode = next((k.value for k in call.keywords if k.arg == "mode"), None)
    position = 1 if isinstance(func, ast.Name) else 0
    if mode is None and len(call.args) > position:
        mode = call.args[position]
    if mode is None:
        return True
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and "b" not in mode.value


def test_text_files_are_read_and_written_as_utf_8():
    # Without an encoding, Python uses the locale's: the same file reads otherwise under a Latin-1 locale.
    found = []
    for path in _python_files(*OURS, "run_guard_gcp", "benchmarks"):
        source = (ROOT / path).read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call) and _text_mode(node):
                if not any(k.arg in ("encoding", None) for k in node.keywords):
                    found.append(f"{path}:{node.lineno}: {ast.get_source_segment(source, node)}")
    assert found == []
