"""The misconfiguration corpus (tests/policies/corpus/): every entry, a small mutation of a demo stack's offline
preview, is caught by the rule it names when the whole pack runs on it through the analyzer protocol; the demo
stacks and valid variants of them give no finding at all. The share caught is the figure docs/policy-checks.md
states."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from infra.tools import preview_json
from infra.tools.offline.digest import to_digest
from infra.tools.offline.engine import preview
from infra.tools.policy_runner import pack_config, runner
from infra.tools.preview_json import PreviewDocument
from policies.pack import RULES
from tests.helpers import ROOT
from tests.policies.corpus import ENTRIES, VALID_MUTATIONS

# Stacks that must pass, as they are and with valid values a user may choose (0 findings each).
VALID = [
    ("registry", ()),
    ("registry-us-east-2", ()),
    ("registry-gcp-mirror", ()),
    ("training-demo", ()),
    ("training-demo", (("mlinfra:training.lifecycle.ttlHours", "336"), ("mlinfra:training.nodeCount", "8"))),
    ("training-demo", (("mlinfra:training.lifecycle.teardownOnCompletion", "false"),)),
    ("training-gcp-demo", ()),
    ("serving-demo", ()),
    ("serving-gcp-demo", ()),
    ("serving-gcp-a100", ()),
    ("serving-gpu-families", ()),
]
RUNNER_RULES = {runner.RETAIN_RULE}


def _document(stack: str, overrides: tuple[tuple[str, str], ...] = ()) -> PreviewDocument:
    result = preview(stack, overrides)
    assert not result.errors, result.errors
    return preview_json.parse(to_digest(result))


@pytest.fixture(scope="module")
def outcomes() -> dict[str, list[runner.Violation]]:
    """Violations per corpus entry id and per valid stack ('valid:<stack>[:n]'), one pack per stack."""
    found: dict[str, list[runner.Violation]] = {}
    mutations = ENTRIES + VALID_MUTATIONS
    stacks = sorted({e.stack for e in mutations} | {s for s, _ in VALID})
    for stack in stacks:
        base = _document(stack)
        variants = [o for s, o in VALID if s == stack]
        with runner.started(base) as client:
            info = client.info()
            client.configure(pack_config.resolve(info))
            for n, overrides in enumerate(variants):
                document = base if not overrides else _document(stack, overrides)
                found[f"valid:{stack}:{n}"] = runner.analyze(client, info, document).violations
            for entry in (e for e in mutations if e.stack == stack):
                mutated = PreviewDocument(
                    base.project, base.stack, base.config, entry.mutate(list(base.resources)), base.providers
                )
                found[entry.id] = runner.analyze(client, info, mutated).violations
    return found


def test_entries_are_many_distinct_and_name_real_rules():
    names = {r.name for r in RULES} | RUNNER_RULES
    ids = [e.id for e in ENTRIES + VALID_MUTATIONS]
    assert len(ENTRIES) >= 60
    assert [i for i, n in Counter(ids).items() if n > 1] == []
    assert [e.rule for e in ENTRIES if e.rule not in names] == []


@pytest.mark.parametrize("stack, n", [(s, i) for s in dict(VALID) for i, _ in enumerate(o for t, o in VALID if t == s)])
def test_valid_stacks_give_no_finding(outcomes, stack, n):
    assert [(v.policy, v.urn, v.message) for v in outcomes[f"valid:{stack}:{n}"]] == []


@pytest.mark.parametrize("entry", VALID_MUTATIONS, ids=lambda e: e.id)
def test_valid_mutations_give_no_finding(outcomes, entry):
    assert [(v.policy, v.urn, v.message) for v in outcomes[entry.id]] == [], entry.why


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
def test_entry_is_caught_by_its_rule(outcomes, entry):
    caught = {v.policy for v in outcomes[entry.id] if v.enforcement == "mandatory" or v.policy == entry.rule}
    assert entry.rule in caught, f"{entry.id} ({entry.why}): found only {sorted(caught)}"


def test_the_documented_share_is_the_measured_one(outcomes):
    caught = [e for e in ENTRIES if entry_caught(outcomes, e)]
    rules = {e.rule for e in ENTRIES}
    text = (ROOT / "docs" / "policy-checks.md").read_text(encoding="utf-8")
    match = re.search(r"catches (\d+) of (\d+) crafted misconfigurations \((\d+) rules\)", text)
    assert match, "docs/policy-checks.md states the corpus figure"
    assert tuple(int(g) for g in match.groups()) == (len(caught), len(ENTRIES), len(rules))


def entry_caught(outcomes: dict[str, list[runner.Violation]], entry) -> bool:
    return any(v.policy == entry.rule for v in outcomes[entry.id])
