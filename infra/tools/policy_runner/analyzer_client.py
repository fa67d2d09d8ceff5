"""Start a Python CrossGuard pack as the Pulumi engine does and talk to it over the analyzer protocol.

The engine (pulumi/pulumi analyzer_plugin.go, NewPolicyAnalyzer) runs a `runtime: python` pack through
the `pulumi-analyzer-policy-python` shim: from the pack's directory, `python -u -m pulumi.policy
<engine address> .` with the python of `runtime.options.virtualenv` when set, and the stack's config,
project, stack and dry-run flag in PULUMI_CONFIG / PULUMI_PROJECT / PULUMI_STACK / PULUMI_DRY_RUN. The
pack prints its gRPC port on stdout. The engine then calls Handshake (Python packs answer
UNIMPLEMENTED), ConfigureStack, GetAnalyzerInfo, Configure, Analyze for each resource and AnalyzeStack
once for all of them. This module does the same, with no engine behind the address it passes.
"""

from __future__ import annotations

import selectors
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from queue import SimpleQueue
from typing import Any

import grpc
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

from infra.tools.policy_runner.pack_process import NO_ENGINE, PackProcess, stop_process
from infra.tools.preview_json import PolicyResource

# As the engine dials analyzers: large messages (a stack's whole AnalyzeStack request is one message).
_MAX_MESSAGE = 400 * 1024 * 1024
_CHANNEL_OPTIONS = [("grpc.max_receive_message_length", _MAX_MESSAGE), ("grpc.max_send_message_length", _MAX_MESSAGE)]
_START_TIMEOUT_S = 60
IN_FLIGHT = 16  # Analyze requests outstanding at once per pack process (the pack serves them on 4 threads)
AHEAD = 4_096  # answers kept at most, waiting for an earlier one

LEVELS = {
    analyzer_pb2.ADVISORY: "advisory",
    analyzer_pb2.MANDATORY: "mandatory",
    analyzer_pb2.REMEDIATE: "remediate",
    analyzer_pb2.DISABLED: "disabled",
}
LEVEL_VALUES = {name: value for value, name in LEVELS.items()}


class PolicyPackError(RuntimeError):
    """The pack did not start or failed while analyzing (a bug in the pack, not bad input)."""


@dataclass(frozen=True)
class Diagnostic:
    policy: str
    pack: str
    pack_version: str
    enforcement: str
    urn: str
    description: str
    message: str  # what is wrong and how to fix it (the SDK's description prefix removed)


@dataclass(frozen=True)
class PolicyInfo:
    name: str
    description: str
    enforcement: str
    config_schema: dict[str, dict[str, Any]]
    stack_policy: bool


@dataclass(frozen=True)
class PackInfo:
    name: str
    version: str
    policies: list[PolicyInfo]
    initial_config: dict[str, dict[str, Any]]


class AnalyzerClient:
    """A running pack: use as a context manager; the process is stopped on exit."""

    def __init__(self, pack_dir: Path, project: str, stack: str, stack_config: Mapping[str, str]):
        self.pack_dir = Path(pack_dir).resolve()
        self.project, self.stack = project, stack
        self.stack_config = dict(stack_config)
        self.version = ""
        self._process: subprocess.Popen | None = None
        self._channel: grpc.Channel | None = None
        self._stub: analyzer_pb2_grpc.AnalyzerStub | None = None
        self._analyzed: dict[int, tuple[PolicyResource, analyzer_pb2.AnalyzeRequest]] = {}  # by id(resource)

    @property
    def stub(self) -> analyzer_pb2_grpc.AnalyzerStub:
        """The analyzer's gRPC stub, once the pack is started."""
        if self._stub is None:
            raise RuntimeError("the policy pack is not started")
        return self._stub

    def __enter__(self) -> AnalyzerClient:
        if self._process is None:  # `runner.start` hands over a client already started: never a second pack
            self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def start(self) -> None:
        self.spawn()
        self.connect()

    def spawn(self) -> None:
        """Start the pack's process; it boots (an interpreter, the SDK, the rules) while the caller goes on."""
        self.adopt(PackProcess.start(self.pack_dir, self.project, self.stack, self.stack_config))

    def adopt(self, pack: PackProcess) -> None:
        """Talk to a pack started earlier (`PackProcess.start`) for this client's project, stack and config."""
        if not pack.serves(self.pack_dir, self.project, self.stack, self.stack_config):
            raise ValueError("the pack was started for another project, stack or config")
        self.version, self._process = pack.version, pack.process

    def connect(self) -> None:
        """Wait for the spawned pack to print its port, and dial it."""
        port = self._read_port()
        self._channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=_CHANNEL_OPTIONS)
        grpc.channel_ready_future(self._channel).result(timeout=_START_TIMEOUT_S)
        self._stub = analyzer_pb2_grpc.AnalyzerStub(self._channel)

    def _read_port(self) -> int:
        assert self._process is not None and self._process.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(self._process.stdout, selectors.EVENT_READ)
        ready = selector.select(timeout=_START_TIMEOUT_S)
        selector.close()
        line = self._process.stdout.readline() if ready else b""
        try:
            return int(line.strip())
        except ValueError:
            self.close()
            stderr = self._process.stderr.read().decode(errors="replace") if self._process.stderr else ""
            tail = " | ".join(stderr.strip().splitlines()[-5:])
            raise PolicyPackError(
                f"policy pack in {self.pack_dir} did not start (printed {line[:80]!r}): {tail}"
            ) from None

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self._process is not None:
            stop_process(self._process)

    # --- the protocol, in the engine's order ----------------------------------------------------

    def handshake(self) -> None:
        request = analyzer_pb2.AnalyzerHandshakeRequest(
            engine_address=NO_ENGINE, root_directory=str(self.pack_dir), program_directory=str(self.pack_dir)
        )
        try:
            self.stub.Handshake(request)
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.UNIMPLEMENTED:  # the engine tolerates this too
                raise

    def configure_stack(self) -> None:
        self.stub.ConfigureStack(
            analyzer_pb2.AnalyzerStackConfigureRequest(
                stack=self.stack,
                project=self.project,
                organization="organization",
                dry_run=True,
                config=self.stack_config,
            )
        )

    def info(self) -> PackInfo:
        reply = self.stub.GetAnalyzerInfo(empty_pb2.Empty())
        policies = [
            PolicyInfo(
                name=p.name,
                description=p.description,
                enforcement=LEVELS[p.enforcementLevel],
                config_schema=_to_python(p.configSchema.properties) if p.HasField("configSchema") else {},
                stack_policy=p.policy_type == analyzer_pb2.POLICY_TYPE_STACK,
            )
            for p in reply.policies
        ]
        initial = {
            k: {"enforcementLevel": LEVELS[v.enforcementLevel], **_to_python(v.properties)}
            for k, v in reply.initialConfig.items()
        }
        # As the engine does, PulumiPolicy.yaml's version wins over the one the pack reports.
        return PackInfo(reply.name, self.version or reply.version, policies, initial)

    def configure(self, config: Mapping[str, Mapping[str, Any]]) -> None:
        request = analyzer_pb2.ConfigureAnalyzerRequest()
        for name, values in config.items():
            entry = request.policyConfig[name]
            entry.enforcementLevel = LEVEL_VALUES[values.get("enforcementLevel", "advisory")]
            entry.properties.update({k: v for k, v in values.items() if k != "enforcementLevel"})
        self.stub.Configure(request)

    def analyze(self, resource: PolicyResource, provider: PolicyResource | None = None) -> list[Diagnostic]:
        return [_diagnostic(d) for d in self.stub.Analyze(_analyze_request(resource, provider)).diagnostics]

    def analyze_each(
        self,
        resources: Iterable[PolicyResource],
        providers: Mapping[str, PolicyResource] = {},
        others: Sequence[AnalyzerClient] = (),
    ) -> Iterator[tuple[PolicyResource, list[Diagnostic]]]:
        """Analyze every resource with up to IN_FLIGHT requests outstanding at once per pack process (the engine,
        too, analyzes resources as they register, concurrently); yields each resource with its diagnostics, in
        order. `others`: further processes of the same pack, configured alike, that share the requests: a
        resource's analysis depends on nothing but its request. Each answer frees its process for the next
        request as it comes, whichever process answers first: a process held up (by AnalyzeStack, say) does not
        hold up the others; answers are kept until those before them are in (at most AHEAD resources ahead)."""
        clients = (self, *others)
        outstanding = [0] * len(clients)
        answers: SimpleQueue[tuple[int, int, Any]] = SimpleQueue()  # (position, process, future), as they finish
        arrived: dict[int, Any] = {}
        queued = list(resources)
        sent = given = 0
        while given < len(queued):
            while sent < len(queued) and sent - given < AHEAD and min(outstanding) < IN_FLIGHT:
                process = outstanding.index(min(outstanding))
                future = clients[process].stub.Analyze.future(self.request(queued[sent], providers))
                future.add_done_callback(lambda done, at=sent, by=process: answers.put((at, by, done)))
                outstanding[process] += 1
                sent += 1
            at, by, future = answers.get()
            outstanding[by] -= 1
            arrived[at] = future
            while given in arrived:
                yield queued[given], answered(arrived.pop(given))
                given += 1

    def request(self, resource: PolicyResource, providers: Mapping[str, PolicyResource]) -> analyzer_pb2.AnalyzeRequest:
        """The resource's Analyze request, converted once for this client's runs (AnalyzeStack reuses it)."""
        analyzed = self._analyzed.get(id(resource))
        if analyzed is not None and analyzed[0] is resource:
            return analyzed[1]
        request = _analyze_request(resource, providers.get(_provider_urn(resource)))
        self._analyzed[id(resource)] = (resource, request)
        return request

    def analyze_stack(
        self, resources: Iterable[PolicyResource], providers: Mapping[str, PolicyResource] = {}
    ) -> list[Diagnostic]:
        return answered(self.send_stack(self.stack_request(resources, providers)))

    def stack_request(
        self, resources: Iterable[PolicyResource], providers: Mapping[str, PolicyResource] = {}
    ) -> analyzer_pb2.AnalyzeStackRequest:
        """The AnalyzeStack request (no pack needed yet: it can be built while the pack boots)."""
        request = analyzer_pb2.AnalyzeStackRequest()
        for resource in resources:
            single = self.request(resource, providers)  # its properties, options and provider: converted once
            entry = request.resources.add(
                type=resource.type,
                properties=single.properties,
                urn=resource.urn,
                name=resource.name,
                options=single.options,
                provider=single.provider if single.HasField("provider") else None,
                parent=resource.parent,
                dependencies=list(resource.dependencies),
            )
            for prop, urns in resource.property_dependencies.items():
                if urns:  # as the engine does: properties without dependencies are left out
                    entry.propertyDependencies[prop].urns.extend(urns)
        return request

    def send_stack(self, request: analyzer_pb2.AnalyzeStackRequest) -> Any:
        """AnalyzeStack, sent: `answered(future)` waits for its answer."""
        return self.stub.AnalyzeStack.future(request)

    def share_requests(self, other: AnalyzerClient) -> None:
        """Convert each resource once for both clients (processes of one pack analyzing one document)."""
        other._analyzed = self._analyzed


def answered(future: Any) -> list[Diagnostic]:
    """The diagnostics of a sent Analyze or AnalyzeStack."""
    return [_diagnostic(d) for d in future.result().diagnostics]


def _analyze_request(resource: PolicyResource, provider: PolicyResource | None) -> analyzer_pb2.AnalyzeRequest:
    return analyzer_pb2.AnalyzeRequest(
        type=resource.type,
        properties=_struct(resource.props),
        urn=resource.urn,
        name=resource.name,
        options=_options(resource),
        provider=_provider(resource, provider),
    )


def _struct(props: Mapping[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(_json_safe(props))
    return struct


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _options(resource: PolicyResource) -> analyzer_pb2.AnalyzerResourceOptions:
    # The protocol has no field for retainOnDelete; the runner checks it apart (infra.tools.policy_runner.runner).
    return analyzer_pb2.AnalyzerResourceOptions(
        protect=resource.protect,
        parent=resource.parent,
        customTimeouts=analyzer_pb2.AnalyzerResourceOptions.CustomTimeouts(),
    )


def _provider_urn(resource: PolicyResource) -> str:
    return resource.provider.rsplit("::", 1)[0] if resource.provider else ""


def _provider(resource: PolicyResource, known: PolicyResource | None) -> analyzer_pb2.AnalyzerProviderResource | None:
    urn = _provider_urn(resource)
    if not urn:
        return None
    parts = urn.split("::")
    return analyzer_pb2.AnalyzerProviderResource(
        type=parts[-2] if len(parts) >= 2 else "",
        name=parts[-1],
        urn=urn,
        properties=_struct(known.props if known else {}),
    )


def _diagnostic(d: analyzer_pb2.AnalyzeDiagnostic) -> Diagnostic:
    message = d.message
    if d.description and message.startswith(d.description):
        message = message[len(d.description) :].lstrip("\n")
    return Diagnostic(
        policy=d.policyName,
        pack=d.policyPackName,
        pack_version=d.policyPackVersion,
        enforcement=LEVELS.get(d.enforcementLevel, "advisory"),
        urn=d.urn,
        description=d.description,
        message=message or d.description,
    )


def _to_python(struct: struct_pb2.Struct) -> dict[str, Any]:
    from google.protobuf import json_format

    return json_format.MessageToDict(struct)
