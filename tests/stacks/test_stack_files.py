"""Bad stack files are bad input: exit 2 with one line naming the file, never a traceback."""

import shutil
import subprocess
import sys

import pytest

from tests.helpers import ROOT


@pytest.fixture
def project(tmp_path):
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    for package in ("infra", "components", "stacks"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def preview(project, stack="broken"):
    return subprocess.run(
        [sys.executable, "-m", "infra", "preview", "--stack", stack],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    "content, message",
    [
        (b"- a\n- b\n", "error: stacks/Pulumi.broken.yaml: must be a map with a `config:` section"),
        (
            b"config:\n  mlinfra:kind: registry\n  mlinfra:kind: registry\n",
            "error: stacks/Pulumi.broken.yaml: not valid YAML at line 3, column 3: duplicate key 'mlinfra:kind'",
        ),
        (
            b"config: [\n",
            "error: stacks/Pulumi.broken.yaml: not valid YAML at line 2, column 1: "
            "expected the node content, but found '<stream end>'",
        ),
        (
            b"config:\n  mlinfra:kind: registry\n  x: " + b"[" * 5000 + b"]" * 5000 + b"\n",
            "error: stacks/Pulumi.broken.yaml: not valid YAML at line 3, column 36: nested more than 32 levels deep",
        ),
        (
            b"config:\n  ? [a, b]\n  : registry\n",
            "error: stacks/Pulumi.broken.yaml: not valid YAML at line 2, column 5: a key must be a plain value, not a "
            "list or a map",
        ),
        *(
            (
                f"config:\n  mlinfra:kind: registry\n  x: {tag} {value}\n".encode(),
                f"error: stacks/Pulumi.broken.yaml: not valid YAML at line 3, column 6: tag {tag} is not allowed in a "
                "stack file (strings, numbers, booleans, null, lists and maps only)",
            )
            for tag, value in (("!!binary", "aGk="), ("!!timestamp", "2026-01-01"), ("!!set", "{a, b}"))
        ),
        (  # a "billion laughs": nine levels of ten aliases each
            b"config:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
            + b"".join(f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n".encode() for i in range(1, 10)),
            "error: stacks/Pulumi.broken.yaml: not valid YAML at line 6, column 7: more than 100,000 values once its "
            "aliases are expanded",
        ),
        (
            b"config:\n  a: &a x\n  b: [" + b", ".join([b"*a"] * 101) + b"]\n",
            "error: stacks/Pulumi.broken.yaml: not valid YAML at line 3, column 407: more than 100 aliases",
        ),
        (
            b"config:\n  aws:region: 2020-01-01\n  mlinfra:kind: registry\n",
            "error: aws:region: must be an AWS region name such as us-east-1 (got '2020-01-01')",
        ),
    ],
)
def test_broken_stack_files(project, content, message):
    (project / "stacks" / "Pulumi.broken.yaml").write_bytes(content)
    done = preview(project)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == message


def test_undecodable_stack_file(project):
    (project / "stacks" / "Pulumi.broken.yaml").write_bytes(b"config:\n  mlinfra:kind: \xff\xfe\n")
    done = preview(project)
    assert done.returncode == 2 and done.stderr.startswith("error: stacks/Pulumi.broken.yaml: cannot be read:")
    assert "Traceback" not in done.stderr
