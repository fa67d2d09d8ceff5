"""A large document is analyzed by two processes of the pack (runner.second_process): the findings are the ones
one process gives, in the same order, and the second process really takes part."""

from __future__ import annotations

import pytest

from infra.tools import preview_json
from infra.tools.policy_runner import analyzer_client, runner
from tests.policies.policy_fixtures import to_document
from tests.policies.test_policy_runner import misconfigured_guard, misconfigured_training


@pytest.fixture(scope="module")
def document() -> preview_json.PreviewDocument:
    # Resource findings (the broken template, file system, log group) and stack findings (the guard's policy).
    resources = misconfigured_training() + [r for r in misconfigured_guard() if r.name.startswith("guard")]
    unique = {r.urn: r for r in resources}
    return preview_json.parse(to_document(list(unique.values()), "training-demo"))


def findings(run: runner.PolicyRun) -> list[tuple[str, str, str]]:
    return [(v.policy, v.urn, v.message) for v in run.violations]


def test_two_processes_find_what_one_finds_and_share_the_work(document, monkeypatch):
    one = runner.run(document)
    assert {v.policy for v in one.violations} >= {"efa-on-every-network-card", "guard-role-scoped-to-run"}

    analyze_calls: dict[int, int] = {}  # per client
    connect = analyzer_client.AnalyzerClient.connect

    def counting_connect(self):
        connect(self)
        analyze, key = self._stub.Analyze, id(self)
        analyze_calls[key] = 0

        class Counted:
            def future(self, request):
                analyze_calls[key] += 1
                return analyze.future(request)

        self._stub.Analyze = Counted()

    monkeypatch.setattr(runner, "SHARD_AT", 2)
    monkeypatch.setattr(analyzer_client.AnalyzerClient, "connect", counting_connect)
    two = runner.run(document)
    assert findings(two) == findings(one)
    assert len(analyze_calls) == 2, analyze_calls
    assert sum(analyze_calls.values()) == len(document.resources)
    assert all(n > 0 for n in analyze_calls.values()), analyze_calls  # the second process took part


def test_a_small_document_or_one_core_starts_one_process(document, monkeypatch):
    monkeypatch.setattr(runner, "SHARD_AT", 2)
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 1)
    with runner.second_process(document) as helper:
        assert helper is None
    monkeypatch.undo()
    monkeypatch.setattr(runner, "SHARD_AT", len(document.resources) + 1)
    with runner.second_process(document) as helper:
        assert helper is None
