"""Bounded fuzzing of the config tier through the real CLI: any `-c key=value` on any demo stack previews
(exit 0) or is refused with exit 2 and one line per problem naming a key path or a file, never a traceback
or an internal error. The keys are every documented config key (docs/configuration.md, generated from the
schema); the values are what a hand or a script might type. A longer run: MLINFRA_FUZZ_EXAMPLES=4000."""

from __future__ import annotations

import os
import re
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.cli import main
from tests.fuzzing import FUZZ
from tests.helpers import ROOT

SECTIONS = {  # docs/configuration.md section -> the demo stack that takes its keys
    "`registry` on AWS": "registry",
    "`training` on AWS": "training-demo",
    "`serving` on AWS": "serving-demo",
    "`registry` on GCP": "registry-gcp-mirror",
    "`training` on GCP": "training-gcp-demo",
    "`serving` on GCP": "serving-gcp-demo",
}
# A problem line names a config key (provider or mlinfra), a flag, or a file.
NAMED = re.compile(r"^error: (?:[a-z]+:[A-Za-z][\w.\[\]-]*|--[a-z-]+|stacks/\S+|Pulumi\.yaml)[: ]")


def documented_keys() -> list[tuple[str, str]]:
    keys, stack = [], None
    for line in (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            stack = SECTIONS.get(line[3:].strip())
        found = re.match(r"^\| `([^`]+)`", line)
        if found and stack:
            keys.append((stack, found.group(1).replace("[]", "[0]")))
    return keys


KEYS = documented_keys()
OUTCOMES: Counter[str] = Counter()  # printed by a long run (MLINFRA_FUZZ_EXAMPLES): cases by outcome
VALUES = st.one_of(
    st.text(max_size=40),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", "true", "null", "[]", "{}", "0.0.0.0/0", "-1", "1e309", "@@COMMAND@@", "$(id)", "a\nb"]),
)


def test_every_section_has_keys():
    assert {stack for stack, _ in KEYS} == set(SECTIONS.values()) and len(KEYS) > 100


@FUZZ
@given(key=st.sampled_from(KEYS), value=VALUES, with_subkey=st.booleans())
def test_any_value_previews_or_is_refused_naming_the_key(key, value, with_subkey, capsys):
    stack, path = key
    if with_subkey:
        path += ".extra"
    if "\x00" in value:  # an OS argument cannot carry a NUL: stack files are fuzzed for that
        value = value.replace("\x00", "")
    code = main(["preview", "--stack", stack, "-c", f"{path}={value}"])
    err = capsys.readouterr().err
    OUTCOMES[f"exit {code}"] += 1
    assert code in (0, 2), err
    assert "Traceback" not in err and "internal error" not in err
    if code == 2:
        problems = [line for line in err.splitlines() if line.startswith("error: ")]
        assert problems and all(NAMED.match(line) for line in problems), err


@pytest.fixture(scope="module", autouse=True)
def report_outcomes():
    yield
    if "MLINFRA_FUZZ_EXAMPLES" in os.environ:
        print(f"\nfuzzed config values by outcome: {dict(sorted(OUTCOMES.items()))}")


# ---- stack files: whatever the file holds, the loader answers with a config or an InputError naming it ----

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20), st.sampled_from(["", "*", "@@RUN_ID@@"])
)
TREES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)
YAML_TEXTS = st.one_of(
    st.text(max_size=200),
    st.sampled_from(
        [
            "config: !!binary aGk=\n",
            "config:\n  ? [a]\n  : 1\n",
            "config: &a [*a]\n",
            "config:\n  mlinfra:kind: training\n  mlinfra:training: {runId: x, nodeCount: !!float .inf}\n",
            "config:\n  mlinfra:kind: serving\n  mlinfra:serving: &s {models: [*s]}\n",
        ]
    ),
)


def load_stack_file(tmp_path, text: str):
    from infra.core.project import Project, stack_config
    from infra.kinds import load

    (tmp_path / "Pulumi.fuzz.yaml").write_text(text, encoding="utf-8", errors="surrogatepass")
    return load(stack_config(Project(tmp_path, "mlinfra", tmp_path), "fuzz"))


@FUZZ
@given(
    kind=st.sampled_from(["registry", "training", "serving", None]),
    cloud=st.sampled_from(["aws", "gcp", None]),
    tree=TREES,
    text=YAML_TEXTS,
    as_text=st.booleans(),
)
def test_any_stack_file_loads_or_is_refused_naming_a_key_or_the_file(tmp_path, kind, cloud, tree, text, as_text):
    import yaml

    from infra.core.errors import InputError

    if as_text:
        body = text
    else:
        config = {"mlinfra:kind": kind, "mlinfra:cloud": cloud, f"mlinfra:{kind or 'training'}": tree}
        body = yaml.safe_dump({"config": {k: v for k, v in config.items() if v is not None}}, allow_unicode=True)
    try:
        load_stack_file(tmp_path, body)
        OUTCOMES["stack file loaded"] += 1
    except InputError as error:
        OUTCOMES["stack file refused"] += 1
        assert error.problems and all(p.path for p in error.problems)
    except UnicodeEncodeError:
        OUTCOMES["not writable as UTF-8"] += 1  # lone surrogates: not a file anyone can save
