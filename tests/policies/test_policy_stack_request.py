"""The runner's AnalyzeStack request reuses what each resource's Analyze request carried (its properties,
options and provider, converted once); the message is the same as one built from the resources alone."""

from pulumi.runtime.proto import analyzer_pb2

from infra.tools import preview_json
from infra.tools.offline.digest import to_digest
from infra.tools.offline.engine import preview
from infra.tools.policy_runner.analyzer_client import AnalyzerClient
from infra.tools.policy_runner.runner import PACK_DIR
from tests.policies.policy_fixtures import to_document, training_resources


class _Reply:
    def result(self):
        return analyzer_pb2.AnalyzeResponse()

    def add_done_callback(self, callback):  # as gRPC's future does once the call is done: at once
        callback(self)


class _Call:
    def __init__(self, sent):
        self.sent = sent

    def future(self, request):
        self.sent.append(request)
        return _Reply()

    def __call__(self, request):
        self.sent.append(request)
        return analyzer_pb2.AnalyzeResponse()


class _Stub:
    """Records the requests instead of sending them."""

    def __init__(self):
        self.analyzed, self.stacks = [], []
        self.Analyze, self.AnalyzeStack = _Call(self.analyzed), _Call(self.stacks)


def _client():
    client = AnalyzerClient(PACK_DIR, "mlinfra", "training-demo", {})
    client._stub = _Stub()
    return client


def test_the_stack_request_is_the_one_built_from_the_resources_alone():
    for document in (
        preview_json.parse(to_document(training_resources(), "training-demo")),
        preview_json.parse(to_digest(preview("training-demo"))),  # default providers: the provider field set
    ):
        fresh, reusing = _client(), _client()
        fresh.analyze_stack(document.resources, document.providers)
        list(reusing.analyze_each(document.resources, document.providers))
        reusing.analyze_stack(document.resources, document.providers)
        assert len(reusing.stub.analyzed) == len(document.resources)
        with_provider = [r.urn for r in reusing.stub.stacks[0].resources if r.HasField("provider")]
        assert with_provider == [r.urn for r in document.resources if r.provider]
        assert reusing.stub.stacks[0].SerializeToString(deterministic=True) == fresh.stub.stacks[0].SerializeToString(
            deterministic=True
        )
        assert reusing.stub.stacks[0] == fresh.stub.stacks[0]


def test_a_resource_analyzed_by_another_client_or_changed_is_converted_again():
    document = preview_json.parse(to_document(training_resources(), "training-demo"))
    other = preview_json.parse(to_document(training_resources(), "training-demo"))
    client = _client()
    list(client.analyze_each(other.resources, other.providers))  # other objects, equal values
    client.analyze_stack(document.resources, document.providers)
    fresh = _client()
    fresh.analyze_stack(document.resources, document.providers)
    assert client.stub.stacks[0] == fresh.stub.stacks[0]
