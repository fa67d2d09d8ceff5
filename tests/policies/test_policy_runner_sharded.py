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
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 2)  # the same on a one-core machine
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


class _Pending:
    """A gRPC future that is done when `finish` is called (its callbacks run then, as gRPC runs them)."""

    def __init__(self, request):
        self.request, self.callbacks, self.done = request, [], False

    def add_done_callback(self, callback):
        if self.done:
            callback(self)
        else:
            self.callbacks.append(callback)

    def finish(self):
        self.done = True
        for callback in self.callbacks:
            callback(self)

    def result(self):
        assert self.done, "an answer was read before it came"
        return analyzer_client.analyzer_pb2.AnalyzeResponse(
            diagnostics=[analyzer_client.analyzer_pb2.AnalyzeDiagnostic(policyName="p", urn=self.request.urn)]
        )


class _Process:
    """A pack process's Analyze: `stalled` ones answer nothing until `release`; the others answer at once, and
    after `release_after` answers release the stalled process's calls."""

    def __init__(self, stalled=False, release_after=0, other=None):
        self.stalled, self.release_after, self.other = stalled, release_after, other
        self.calls: list[_Pending] = []
        self.answered_before_release = self.calls_while_stalled = 0

    def future(self, request):
        call = _Pending(request)
        self.calls.append(call)
        if not self.stalled:
            call.finish()
            if self.other is not None and self.other.stalled and len(self.calls) == self.release_after:
                self.answered_before_release, self.other.calls_while_stalled = len(self.calls), len(self.other.calls)
                self.other.stalled = False
                for pending in self.other.calls:
                    pending.finish()
        return call


def test_a_process_held_up_does_not_hold_up_the_other_and_answers_stay_in_order(document, monkeypatch):
    resources = document.resources * (6 * analyzer_client.IN_FLIGHT // len(document.resources) + 1)
    first, second = (analyzer_client.AnalyzerClient(runner.PACK_DIR, "mlinfra", "training-demo", {}) for _ in "12")
    stalled = _Process(stalled=True)  # as a process busy with AnalyzeStack
    quick = _Process(release_after=4 * analyzer_client.IN_FLIGHT, other=stalled)
    monkeypatch.setattr(first, "_stub", type("Stub", (), {"Analyze": stalled})())
    monkeypatch.setattr(second, "_stub", type("Stub", (), {"Analyze": quick})())

    answered = list(first.analyze_each(resources, document.providers, [second]))

    assert [r.urn for r, _ in answered] == [r.urn for r in resources]
    assert [[d.urn for d in found] for _, found in answered] == [[r.urn] for r in resources]
    assert stalled.calls_while_stalled == analyzer_client.IN_FLIGHT  # its window filled, then no more until it answered
    assert quick.answered_before_release == 4 * analyzer_client.IN_FLIGHT  # the other went on meanwhile
    assert len(stalled.calls) + len(quick.calls) == len(resources)
