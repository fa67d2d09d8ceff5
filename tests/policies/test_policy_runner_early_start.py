"""`python -m infra policy --stack` starts the pack before the preview; the run takes that process over only when
it was started for the document's project, stack and config, and no path leaves a pack process running."""

import pytest

from infra.cli import main
from infra.core.errors import InputError
from infra.tools import preview_json
from infra.tools.policy_runner import pack_process, runner
from infra.tools.policy_runner.analyzer_client import AnalyzerClient
from tests.policies.policy_fixtures import registry_resources, to_document

CONFIG = {"aws:region": "us-east-1"}


@pytest.fixture
def document():
    return preview_json.parse(to_document(registry_resources(), "registry", CONFIG))


@pytest.fixture
def spawns(monkeypatch):
    """The packs the client starts itself (not those it adopts)."""
    started = []
    spawn = AnalyzerClient.spawn

    def counting(self):
        started.append(self.stack)
        spawn(self)

    monkeypatch.setattr(AnalyzerClient, "spawn", counting)
    return started


def test_a_pack_started_for_the_document_is_taken_over(document, spawns):
    started = pack_process.start_early("mlinfra", "registry", CONFIG)
    assert started is not None
    done = runner.run(document, started=started)
    assert spawns == []  # the early process answered: no second pack
    assert started.process.poll() is not None  # and it is stopped at the end
    assert done.violations == runner.run(document).violations and spawns == ["registry"]


def test_a_pack_started_for_another_stack_or_config_is_stopped_and_replaced(document, spawns):
    for stack, config in (("training-demo", CONFIG), ("registry", {"aws:region": "us-west-2"})):
        started = pack_process.start_early("mlinfra", stack, config)
        assert started is not None
        done = runner.run(document, started=started)
        assert started.process.poll() is not None
        assert done.stack == "registry" and done.resources == len(document.resources)
    assert spawns == ["registry", "registry"]


def test_a_pack_that_cannot_start_early_is_reported_by_the_run(tmp_path, document):
    assert pack_process.start_early("mlinfra", "registry", CONFIG, pack_dir=tmp_path) is None
    with pytest.raises(InputError) as raised:
        runner.run(document, pack_dir=tmp_path)
    assert str(raised.value.problems[0]) == (
        f"{tmp_path / 'PulumiPolicy.yaml'}: not found; a policy pack directory has a PulumiPolicy.yaml"
    )


def test_config_the_preview_rejects_exits_2_and_stops_the_early_pack(monkeypatch, capsys):
    early, start_early = [], pack_process.start_early

    def recording(*args, **kwargs):
        early.append(start_early(*args, **kwargs))
        return early[-1]

    monkeypatch.setattr(pack_process, "start_early", recording)
    assert main(["policy", "--stack", "training-demo", "-c", "mlinfra:training.nodeCount=zero"]) == 2
    message = "error: mlinfra:training.nodeCount: Input should be a valid integer (got 'zero')\n"
    assert capsys.readouterr().err == message
    assert len(early) == 1 and early[0] is not None and early[0].process.poll() is not None


def test_an_unknown_stack_starts_no_pack(monkeypatch, capsys):
    monkeypatch.setattr(pack_process, "start_early", lambda *a, **k: pytest.fail("started a pack"))
    assert main(["policy", "--stack", "no-such-stack"]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_a_started_pack_used_as_a_context_is_one_process_stopped_on_exit(document, spawns):
    # `with runner.started(...)` entered the client a second time and left the first pack running
    with runner.started(document) as client:
        process = client._process
        assert process is not None and process.poll() is None
    assert spawns == ["registry"]
    assert process.poll() is not None
