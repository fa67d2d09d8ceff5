"""The docs a clone has are whole: the generated pages match the code, every relative link and anchor in
README, CONTRIBUTING, CHANGELOG and docs/ resolves inside the repository, and no file cites a document a
clone does not have."""

from __future__ import annotations

import re
import subprocess

import pytest

from infra.tools import docs
from tests.helpers import ROOT, run_cli

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
PAGES = [
    "README.md",
    "CONTRIBUTING.md",
    "CHANGELOG.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped (but - and _), spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: str) -> set[str]:
    text = (ROOT / page).read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return {_slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


@pytest.mark.parametrize("name", sorted(docs.PAGES))
def test_generated_pages_are_current(name):
    committed = (ROOT / "docs" / name).read_text(encoding="utf-8")
    assert committed == docs.PAGES[name](), f"docs/{name} is out of date: run `python -m infra docs`"


def test_docs_check_verb_reports_a_stale_page(tmp_path):
    (tmp_path / "configuration.md").write_text("stale\n", encoding="utf-8")
    result = run_cli("docs", "--out", str(tmp_path), "--check")
    assert result.returncode == 1
    assert f"out of date: {tmp_path / 'configuration.md'}" in result.stdout
    assert f"out of date: {tmp_path / 'policies.md'}" in result.stdout


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_resolves(page):
    broken = []
    text = re.sub(r"```.*?```", "", (ROOT / page).read_text(encoding="utf-8"), flags=re.S)
    for target in LINK.findall(re.sub(r"`[^`\n]*`", "", text)):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = ((ROOT / page).parent / path).resolve() if path else ROOT / page
        if not resolved.exists() or ROOT not in [resolved, *resolved.parents]:
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(str(resolved.relative_to(ROOT))):
            broken.append(target)
    assert broken == []


def test_readme_is_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 200


def test_no_file_cites_a_document_a_clone_lacks():
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    me = "tests/infra/tools/test_docs.py"
    citing = [
        f
        for f in files
        if f != me
        and (ROOT / f).is_file()
        and not f.endswith((".svg", ".gz"))
        and re.search(r"REFERENCE\.md|DESIGN\.md|\.\./shared", (ROOT / f).read_text(errors="replace", encoding="utf-8"))
    ]
    assert citing == []
